# How long `u = t * 2` takes after an async all_reduce, natively and under streamsan: the
# window in which NCCL's watchdog may query the all_reduce's end event first.
import sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl"); rank = dist.get_rank(); torch.cuda.set_device(rank)
t = torch.full((1 << 20,), float(rank + 1), device="cuda")
a = time.perf_counter(); work = dist.all_reduce(t, async_op=True)
b = time.perf_counter(); u = t * 2
c = time.perf_counter(); v = t * 3
d = time.perf_counter(); work.wait(); torch.cuda.synchronize()
print(f"gap: all_reduce {1e3*(b-a):.2f} ms, first mul {1e3*(c-b):.2f} ms, second mul {1e3*(d-c):.2f} ms", flush=True)
dist.destroy_process_group()
