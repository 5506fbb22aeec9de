#!/bin/sh
# footprint=learn against params on the same programs (tests/gpu/footprint/workload.py),
# each under `--phase-times` with 10 and 40 timed steps after 6 warm-up steps (phase_diff.py
# takes the difference), on one machine. Output under $OUT/l.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
o=$OUT/l; mkdir -p $o
sh tests/gpu/provenance.sh > $o/provenance.txt
for n in 10 40; do
  for w in gpt2 resnet; do
    for mode in params learn; do
      STREAMSAN_FOOTPRINT_TRACE=counters .device/streamsan run --footprint $mode --phase-times --exitcode 0 --report /tmp/ph.%p.json -- $PY tests/gpu/footprint/workload.py $w 6 $n > $o/$mode-$w-$n.txt 2>&1
    done
  done
done
