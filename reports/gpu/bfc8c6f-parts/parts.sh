# The host-race guard's cost with a long copy's first 16 pages and its last guarded (the
# default since bfc8c6f) against every page (--host-race-pages 0) and the guard off:
# ResNet-18 with the side-stream prefetcher (12 MiB batches), 300 steps, under --phase-times,
# the three modes alternated, two rounds.
date -u; mkdir -p $OUT/p; sh tests/gpu/provenance.sh > $OUT/p/provenance.txt
for r in 1 2; do
  for mode in off parts every; do
    case $mode in off) flags= ;; parts) flags=--host-races ;; every) flags="--host-races --host-race-pages 0" ;; esac
    timeout 70 .device/streamsan run --exitcode 0 --phase-times $flags --report "/tmp/p.%p.json" -- \
      python3 tests/gpu/perf/programs.py resnet18_prefetch 300 5 > $OUT/p/resnet18_prefetch-$mode-$r.txt 2>&1
    echo "$mode $r rc=$? $(grep -o '"median_step_ms": [0-9.]*' $OUT/p/resnet18_prefetch-$mode-$r.txt | tail -1) $(grep -c 'host-race' $OUT/p/resnet18_prefetch-$mode-$r.txt) host-race lines"
  done
done
tar czf $OUT/p.tgz -C $OUT p; rm -rf $OUT/p; date -u
