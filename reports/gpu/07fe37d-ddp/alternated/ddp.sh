# torch_ddp (1 rank) read_before_wait and its side-stream twin, alternated between HEAD's shim
# (.device) and the shim before a5bb425 (.device-main), N rounds; prints what each run reported.
# usage: sh .abtmp/ddp.sh N
n=$1
sh tests/gpu/provenance.sh
echo "main shim sha256: $(sha256sum .device-main/libstreamsan_shim.so | cut -d' ' -f1)"
for i in $(seq 1 $n); do
  for mode in read_before_wait side_stream_read_before_wait; do
    for v in device device-main; do
      d=$OUT/ddp/$i-$mode-$v; mkdir -p $d
      start=$(date +%s.%N)
      STREAMSAN_SHIM=$PWD/.$v/libstreamsan_shim.so STREAMSAN_OPTIONS=exitcode=0 \
        .device/streamsan run --report "$d/report.%p.json" -- \
        python3 -m torch.distributed.run --nproc_per_node=1 tests/gpu/apps/torch_ddp.py $mode > $d/out.txt 2>&1
      rc=$?
      kinds=$(python3 -c 'import json,glob,sys; print(sorted({r["kind"] for f in glob.glob(sys.argv[1]+"/report.*.json") for r in json.load(open(f))["races"]}))' $d)
      echo "$i $mode $v rc=$rc $(python3 -c "import time;print(round(time.time()-$start,1))") s reported=$kinds"
    done
  done
done
