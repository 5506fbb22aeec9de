# Issue 14's rows toggled in one process (all of the shim against every hook forwarded),
# for two experiments shims, alternated row by row: .device-before/ (HEAD before the change)
# and .device/ (after). ORDER: which goes first in odd rows.
date -u; mkdir -p $OUT/t; sh tests/gpu/provenance.sh > $OUT/t/provenance.txt
for b in .device-before .device; do echo "$b experiments shim sha256: $(sha256sum $b/experiments/libstreamsan_shim.so | cut -d' ' -f1)" >> $OUT/t/provenance.txt; done
i=0
for p in ${ROWS:-resnet18_prefetch:500 gcn:750 ddp:750 gpt2:300 launch_bound:750 maskrcnn:80 compiled_mlp:750}; do
  n=${p%%:*}; s=${p##*:}; i=$((i+1))
  if [ $(( (i + ${ORDER:-0}) % 2 )) = 0 ]; then builds=".device-before .device"; else builds=".device .device-before"; fi
  for b in $builds; do
    tag=$( [ $b = .device ] && echo now || echo before )
    STREAMSAN_SHIM=$PWD/$b/experiments/libstreamsan_shim.so STREAMSAN_TOGGLE=0,16 timeout 150 \
      .device/streamsan run --exitcode 0 --report "/tmp/t.%p.json" -- python3 tests/gpu/perf/programs.py $n $s 5 > $OUT/t/$tag-$n.txt 2>&1
    echo "$tag $n rc=$? $(python3 tests/gpu/perf/toggle.py --against FORWARD_ALL $OUT/t/$tag-$n.txt | grep 'all of the shim' | tail -1)"
  done
done
tar czf $OUT/t.tgz -C $OUT t; rm -rf $OUT/t; date -u
