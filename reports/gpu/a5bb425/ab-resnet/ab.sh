# A/B inside processes: ResNet-18, all of the shim against every hook forwarded, new shim and main's alternated.
# usage: sh /tmp/ab.sh ROUND_TAG STEPS   (carried as .device-new = this commit's build, .device-main = main's)
tag=$1; steps=$2
mkdir -p $OUT/r
for v in new main; do
  STREAMSAN_SHIM=$PWD/.device-$v/experiments/libstreamsan_shim.so STREAMSAN_TOGGLE=0,16 \
    .device/streamsan run --exitcode 0 --report "/tmp/ab.%p.json" -- \
    python3 tests/gpu/perf/programs.py resnet18_prefetch $steps 5 > $OUT/r/toggled-$v-$tag.txt 2>&1
  echo "$v-$tag rc=$? $(python3 tests/gpu/perf/toggle.py --against FORWARD_ALL $OUT/r/toggled-$v-$tag.txt | grep 'all of the shim' | tail -1)"
done
