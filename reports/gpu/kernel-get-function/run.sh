#!/bin/sh
# cuKernelGetFunction's cost natively and under two streamsan builds (kernel_function_loop.c,
# three processes each, alternated), the GPU machine's CPU layout, and the launch path's
# steady state of ResNet-18 and GPT-2 at this build (tests/gpu/perf/steady_state.sh, with
# the phase "batch told on program threads"). From the repository root, with .device/ (this
# build) and .device-before/ (the build before) carried. Everything lands in $OUT/all.tgz.
set -u
PY=${PYTHON:-python3}
export CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda-13* | head -1)}
o=/tmp/kgf; mkdir -p $o
d=reports/gpu/kernel-get-function
{ sh tests/gpu/provenance.sh; echo "before: $(sha256sum .device-before/libstreamsan_shim.so)"; } > $o/provenance.txt
lscpu > $o/lscpu.txt; lscpu -e >> $o/lscpu.txt
cc -O2 $d/kernel_function_loop.c -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/kgf_loop || exit 1
for r in 1 2 3; do
  /tmp/kgf_loop 100000 5 > $o/loop-native-$r.txt 2>&1
  .device/streamsan run --phase-times --exitcode 0 --report /tmp/kgf.%p.json -- /tmp/kgf_loop 100000 5 > $o/loop-now-$r.txt 2>&1
  .device-before/streamsan run --phase-times --exitcode 0 --report /tmp/kgf.%p.json -- /tmp/kgf_loop 100000 5 > $o/loop-before-$r.txt 2>&1
done
OUT=$o NATIVE=0 BUILDS="now=.device/streamsan" sh tests/gpu/perf/steady_state.sh 10 40 resnet18_prefetch gpt2
tar czf $OUT/all.tgz -C /tmp kgf
