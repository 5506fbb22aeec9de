cd /work/main
export STANDIN_LAUNCH_NS=5000
for r in 1 2 3; do
  for s in main ahead; do
    target/release/streamsan-bench --shim /tmp/shim-$s.so --only training_step_cold_2m,training_step_cold_16m --repeat 3 > /tmp/benchab/lead-$s-$r.txt 2>&1
  done
done
echo done
