#!/bin/sh
# counts.py natively and under streamsan, alternated, on two real programs. Output under $OUT/c.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
o=$OUT/c; mkdir -p $o
sh tests/gpu/provenance.sh > $o/provenance.txt
for r in 1 2 3; do
  for p in resnet18_prefetch gpt2; do
    $PY reports/gpu/host-time/counts.py $p 40 5 > $o/counts-native-$p-$r.txt 2>&1
    grep -q '"error"' $o/counts-native-$p-$r.txt && exit 0
    .device/streamsan run --exitcode 0 --report /tmp/c.%p.json -- $PY reports/gpu/host-time/counts.py $p 40 5 > $o/counts-streamsan-$p-$r.txt 2>&1
  done
done
