#!/bin/sh
# probed.py natively and under streamsan, alternated, four rounds. Output under $OUT/p.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
o=$OUT/p; mkdir -p $o
sh tests/gpu/provenance.sh > $o/provenance.txt
for r in 1 2 3 4; do
  $PY reports/gpu/host-time/probed.py resnet18_prefetch 60 5 > $o/native-$r.txt 2>&1
  .device/streamsan run --exitcode 0 --report /tmp/p.%p.json -- $PY reports/gpu/host-time/probed.py resnet18_prefetch 60 5 > $o/streamsan-$r.txt 2>&1
done
for f in $o/*-?.txt; do echo "$f $(grep -h '^{' $f | cut -c1-170)"; done
