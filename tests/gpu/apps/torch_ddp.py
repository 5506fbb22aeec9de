# PyTorch DistributedDataParallel over NCCL, one process per GPU (started with
# torch.distributed.run; two GPUs, or one: NCCL with one rank runs each collective on its
# stream too). Clean: a DDP training loop (gradient buckets all-reduced on NCCL's
# stream, ordered with the compute stream by events) and an all_reduce waited on before use.
# Racy: an asynchronous all_reduce whose result is read before work.wait(), the classic
# misuse of async_op=True (NCCL's kernel writes the tensor on NCCL's stream while the
# default stream reads it). The side-stream pair reads the all_reduce's result on a second
# stream that waited for the current one: before work.wait() (racy) and after it (clean:
# wait() orders the current stream after NCCL's, and the side stream after the current).
# Usage: python -m torch.distributed.run --nproc_per_node=2|1 torch_ddp.py
#        clean|read_before_wait|side_stream_read_before_wait|side_stream_read_after_wait
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
torch.manual_seed(0)

if mode == "read_before_wait":
    t = torch.full((1 << 20,), float(rank + 1), device="cuda")
    work = dist.all_reduce(t, async_op=True)
    u = t * 2                                   # reads t before work.wait()
    work.wait()
    torch.cuda.synchronize()
    if rank == 0:
        print("torch_ddp:", mode, "done")
    dist.destroy_process_group()
    sys.exit(0)

if mode in ("side_stream_read_before_wait", "side_stream_read_after_wait"):
    t = torch.full((1 << 20,), float(rank + 1), device="cuda")
    side = torch.cuda.Stream()
    work = dist.all_reduce(t, async_op=True)
    if mode == "side_stream_read_after_wait":
        work.wait()                             # the current stream waits for NCCL's
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        u = t * 2                               # racy: NCCL may still be writing t
    t.record_stream(side)
    work.wait()
    torch.cuda.synchronize()
    if rank == 0:
        print("torch_ddp:", mode, "done")
    dist.destroy_process_group()
    sys.exit(0)

model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(20):
    x = torch.randn(64, 512, device="cuda")
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
t = torch.full((1 << 20,), float(rank + 1), device="cuda")
work = dist.all_reduce(t, async_op=True)
work.wait()                                     # the current stream waits for NCCL's
u = t * 2
torch.cuda.synchronize()
checksum = sum(float(p.double().sum()) for p in model.parameters())
if rank == 0:
    print("torch_ddp:", mode, round(float(u[0]), 3), round(checksum, 3))
dist.destroy_process_group()
