# Each row of issue 14 toggled inside one process at HEAD's experiments shim: all of the shim
# against every hook forwarded (modes 0 and 16), one process each.
date -u; mkdir -p $OUT/t; sh tests/gpu/provenance.sh > $OUT/t/provenance.txt
echo "experiments shim sha256 (as run): $(sha256sum .device/experiments/libstreamsan_shim.so | cut -d' ' -f1)" >> $OUT/t/provenance.txt
for p in ${ROWS:-ddp:1500 maskrcnn:200 compiled_mlp:1500 gpt2:600 gcn:1500 launch_bound:1500}; do
  n=${p%%:*}; s=${p##*:}
  STREAMSAN_SHIM=$PWD/.device/experiments/libstreamsan_shim.so STREAMSAN_TOGGLE=0,16 timeout 150 \
    .device/streamsan run --exitcode 0 --report "/tmp/t.%p.json" -- python3 tests/gpu/perf/programs.py $n $s 5 > $OUT/t/toggled-$n.txt 2>&1
  echo "$n rc=$? $(python3 tests/gpu/perf/toggle.py --against FORWARD_ALL $OUT/t/toggled-$n.txt | grep 'all of the shim' | tail -1)"
done
tar czf $OUT/t.tgz -C $OUT t; rm -rf $OUT/t; date -u
