#!/bin/sh
# The diagnostic call behind this folder's README: footprint=exact's cost split between the
# patch's own work and the instrumentation it rides on. Builds two variants of the patch
# with the toolkit's nvcc (empty: the patch is called and returns; noinsert: the warp's
# agreement on its range, no table update), then runs axpy_probe.py natively and under a
# diagnostic shim (.diag/: the shim of this folder's BUILD with the one change that
# STREAMSAN_DIAG_PATCH names the fatbin to add), and the GPT-2 and ResNet workloads of
# tests/gpu/footprint. Output under $OUT.
set -u
export CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda-13* | head -1)}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
here=reports/gpu/exact-floor
v=/tmp/variants; mkdir -p $v
src=shim/footprint/patch/footprint.cu
cp $src $v/current.cu
sed 's/if (userdata != nullptr) record/if (userdata == (void*)1) record/' $src > $v/empty.cu
sed 's/if ((uint32_t)(__ffs(peers) - 1) == lane) {/if ((uint32_t)(__ffs(peers) - 1) == lane \&\& t->reserved == 12345u) {/' $src > $v/noinsert.cu
for k in current empty noinsert; do
  "$CUDA_HOME/bin/nvcc" --fatbin --compile-as-tools-patch -O3 -I"$CUDA_HOME/compute-sanitizer/include" \
    -gencode arch=compute_90,code=sm_90 -o $v/$k.fatbin $v/$k.cu || echo "build $k failed"
done
diff $v/current.cu $v/noinsert.cu > /dev/null && echo "noinsert: sed did not apply"
diff $v/current.cu $v/empty.cu > /dev/null && echo "empty: sed did not apply"
run() { # label, then the command
  label=$1; shift
  echo "## $label"
  "$@" 2>&1 | grep -v '^\[transformers\]' | tail -4
}
for n in 65536 1048576 16777216; do
  run "axpy $n native" $PY $here/axpy_probe.py $n
  for k in current noinsert empty; do
    STREAMSAN_DIAG_PATCH=$v/$k.fatbin STREAMSAN_FOOTPRINT_TRACE=counters run "axpy $n exact $k" \
      .diag/streamsan run --footprint exact --quiet --exitcode 0 --report /tmp/d.%p.json -- $PY $here/axpy_probe.py $n
  done
done
for w in gpt2 resnet; do
  run "$w native" $PY tests/gpu/footprint/workload.py $w 3 5
  for k in current empty; do
    STREAMSAN_DIAG_PATCH=$v/$k.fatbin STREAMSAN_FOOTPRINT_TRACE=counters run "$w exact $k" \
      .diag/streamsan run --footprint exact --quiet --exitcode 0 --report /tmp/d.%p.json -- $PY tests/gpu/footprint/workload.py $w 3 5
  done
done
