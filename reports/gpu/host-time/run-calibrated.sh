#!/bin/sh
# calibrated.py natively and under streamsan, alternated, four rounds. Output under $OUT/k.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
o=$OUT/k; mkdir -p $o
sh tests/gpu/provenance.sh > $o/provenance.txt
for r in 1 2 3 4; do
  $PY reports/gpu/host-time/calibrated.py resnet18_prefetch 40 5 > $o/native-$r.txt 2>&1
  .device/streamsan run --exitcode 0 --report /tmp/k.%p.json -- $PY reports/gpu/host-time/calibrated.py resnet18_prefetch 40 5 > $o/streamsan-$r.txt 2>&1
done
grep -h '^{' $o/*-?.txt
