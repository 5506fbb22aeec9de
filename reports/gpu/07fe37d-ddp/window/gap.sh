sh tests/gpu/provenance.sh
for i in 1 2 3; do
  echo "native $i: $(python3 -m torch.distributed.run --nproc_per_node=1 .abtmp/gap.py 2>&1 | grep gap:)"
  echo "streamsan $i: $(STREAMSAN_OPTIONS=exitcode=0 .device/streamsan run --report /tmp/gap.%p.json -- python3 -m torch.distributed.run --nproc_per_node=1 .abtmp/gap.py 2>&1 | grep gap:)"
  echo "streamsan phase_times $i: $(STREAMSAN_OPTIONS=exitcode=0:phase_times=1 .device/streamsan run --report /tmp/gap.%p.json -- python3 -m torch.distributed.run --nproc_per_node=1 .abtmp/gap.py > /tmp/pt.$i.txt 2>&1; grep gap: /tmp/pt.$i.txt)"
done
cat /tmp/pt.1.txt | grep -v "^\s*#" | tail -60
