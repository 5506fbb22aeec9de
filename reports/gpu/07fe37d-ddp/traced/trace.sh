# The exp/trace-order shim (.device-trace): every queue push, launch and query with its thread
# and time, for torch_ddp (1 rank) read_before_wait and its side-stream twin, N runs each.
n=$1
sh tests/gpu/provenance.sh
echo "trace shim sha256: $(sha256sum .device-trace/libstreamsan_shim.so | cut -d' ' -f1)"
for i in $(seq 1 $n); do
  for mode in read_before_wait side_stream_read_before_wait; do
    d=$OUT/trace/$i-$mode; mkdir -p $d
    STREAMSAN_TRACE=1 STREAMSAN_SHIM=$PWD/.device-trace/libstreamsan_shim.so STREAMSAN_OPTIONS=exitcode=0 \
      .device/streamsan run --report "$d/report.%p.json" -- \
      python3 -m torch.distributed.run --nproc_per_node=1 tests/gpu/apps/torch_ddp.py $mode > $d/out.txt 2>&1
    kinds=$(python3 -c 'import json,glob,sys; print(sorted({r["kind"] for f in glob.glob(sys.argv[1]+"/report.*.json") for r in json.load(open(f))["races"]}))' $d)
    echo "$i $mode rc=$? lines=$(grep -c '^trace' $d/out.txt) reported=$kinds"
  done
done
