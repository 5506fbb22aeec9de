# The host-race guard's cost at HEAD (b86c8f5 and 7b0401d since 07fe37d-guard/2-after): each program
# under --phase-times with the guard off and on, alternated (as 07fe37d-guard/1-before/guard.sh).
date -u; mkdir -p $OUT/g; sh tests/gpu/provenance.sh > $OUT/g/provenance.txt
for r in 1 2; do
  for p in resnet18_prefetch:300 gpt2:200; do
    n=${p%%:*}; s=${p##*:}
    [ $r = 2 ] && [ $n = gpt2 ] && continue
    for mode in off on; do
      flag=; [ $mode = on ] && flag=--host-races
      timeout 120 .device/streamsan run --exitcode 0 --phase-times $flag --report "/tmp/g.%p.json" -- \
        python3 tests/gpu/perf/programs.py $n $s 5 > $OUT/g/$n-$mode-$r.txt 2>&1
      echo "$n $mode $r rc=$? $(grep -o '"median_step_ms": [0-9.]*' $OUT/g/$n-$mode-$r.txt) $(grep -c 'host-race' $OUT/g/$n-$mode-$r.txt) host-race lines"
    done
  done
done
tar czf $OUT/g.tgz -C $OUT g; rm -rf $OUT/g; date -u
