#!/bin/sh
# The steady state of the launch path (footprint=params) and of footprint=learn: each
# program under `--phase-times` with 20 and 80 timed steps (phase_diff.py takes the
# difference), natively beside them with the same steps. Output under $OUT/s.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
o=$OUT/s; mkdir -p $o
sh tests/gpu/provenance.sh > $o/provenance.txt
for n in 20 80; do
  for p in resnet18_prefetch gpt2; do
    .device/streamsan run --phase-times --exitcode 0 --report /tmp/ph.%p.json -- $PY tests/gpu/perf/programs.py $p $n 5 > $o/params-$p-$n.txt 2>&1
    $PY tests/gpu/perf/programs.py $p $n 5 > $o/native-$p-$n.txt 2>&1
  done
  for w in gpt2 resnet; do
    STREAMSAN_FOOTPRINT_TRACE=counters .device/streamsan run --footprint learn --phase-times --exitcode 0 --report /tmp/ph.%p.json -- $PY tests/gpu/footprint/workload.py $w 6 $((n / 2)) > $o/learn-$w-$((n / 2)).txt 2>&1
  done
done
for n in 10 40; do $PY tests/gpu/footprint/workload.py gpt2 6 $n > $o/native-gpt2-w-$n.txt 2>&1; $PY tests/gpu/footprint/workload.py resnet 6 $n > $o/native-resnet-w-$n.txt 2>&1; done
