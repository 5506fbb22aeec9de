#!/bin/sh
# Where host time goes (this folder's README): the driver's own cost of a launch natively
# and as the shim's phase table measures it inside (launch_loop.c), and each thread's CPU
# time per step of two real programs natively and under streamsan (threads.py), alternated.
# Output under $OUT/h.
set -u
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
export CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda-13* | head -1)}
o=$OUT/h; mkdir -p $o
d=reports/gpu/host-time
sh tests/gpu/provenance.sh > $o/provenance.txt
cc -O2 $d/launch_loop.c -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/launch_loop || exit 1
for r in 1 2 3; do
  /tmp/launch_loop 100000 5 > $o/loop-native-$r.txt 2>&1
  .device/streamsan run --phase-times --exitcode 0 --report /tmp/h.%p.json -- /tmp/launch_loop 100000 5 > $o/loop-streamsan-$r.txt 2>&1
done
for r in 1 2; do
  for p in resnet18_prefetch gpt2; do
    $PY $d/threads.py $p 60 5 > $o/threads-native-$p-$r.txt 2>&1
    .device/streamsan run --exitcode 0 --report /tmp/h.%p.json -- $PY $d/threads.py $p 60 5 > $o/threads-streamsan-$p-$r.txt 2>&1
  done
done
