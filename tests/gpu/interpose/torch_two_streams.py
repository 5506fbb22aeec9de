# PyTorch on two streams: each round a kernel on s1, wait_stream, a kernel on s2 that reads
# s1's result (record_stream), wait_stream back. Run with the native caching allocator and
# with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync. Usage: torch_two_streams.py ROUNDS
import json, os, sys
import torch

rounds = int(sys.argv[1])
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.ones(1 << 20, device="cuda")
acc = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()
for _ in range(rounds):
    with torch.cuda.stream(s1):
        y = x * 2                     # one kernel (and, under cudaMallocAsync, one allocation)
    s2.wait_stream(s1)                # one event record, one wait
    with torch.cuda.stream(s2):
        acc.add_(y)                   # one kernel
    y.record_stream(s2)
    s1.wait_stream(s2)                # one event record, one wait
    del y                             # (under cudaMallocAsync, one free)
torch.cuda.synchronize()
print("torch_two_streams:", rounds, "rounds, checksum", acc.sum().item())
expect = {"launch": 2, "event_record": 2, "wait": 2}
if "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
    expect.update({"alloc": 1, "free": 1})
print("EXPECT", json.dumps(expect))
