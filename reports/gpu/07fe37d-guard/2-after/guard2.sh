# At the guard fix's build: the host-race and scenario suites, then ResNet-18 with the guard
# off and on under --phase-times (as guard.sh did at 07fe37d).
date -u; mkdir -p $OUT/a $OUT/g; sh tests/gpu/provenance.sh > $OUT/a/provenance.txt; cp $OUT/a/provenance.txt $OUT/g/
OUT=$OUT/a timeout 170 sh tests/gpu/all.sh host_races scenarios > $OUT/a/all-run.txt 2>&1; echo all-rc=$?; date -u
tail -12 $OUT/a/all-run.txt
for mode in off on; do
  flag=; [ $mode = on ] && flag=--host-races
  timeout 60 .device/streamsan run --exitcode 0 --phase-times $flag --report "/tmp/g.%p.json" -- \
    python3 tests/gpu/perf/programs.py resnet18_prefetch 300 5 > $OUT/g/resnet18_prefetch-$mode-1.txt 2>&1
  echo "resnet18_prefetch $mode rc=$? $(grep -o '"median_step_ms": [0-9.]*' $OUT/g/resnet18_prefetch-$mode-1.txt | tail -1) $(grep -E 'batch told on program' $OUT/g/resnet18_prefetch-$mode-1.txt)"
done
tar czf $OUT/ag.tgz -C $OUT a g; rm -rf $OUT/a $OUT/g; date -u
