cd /work/main
for r in 1 2 3; do
  for s in main ahead; do
    target/release/streamsan-bench --shim /tmp/shim-$s.so --only training_step,training_step_cold_2m,training_step_cold_16m --repeat 3 > /tmp/benchab/$s-$r.txt 2>&1
  done
done
echo done
