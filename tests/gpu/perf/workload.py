# PyTorch workloads for the overhead comparison (run.py): prints one line of JSON with the
# best time of the timed loop. Usage: workload.py launch_bound|compute_bound [REPEATS]
import json
import sys
import time

import torch

kind = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(0)
if kind == "launch_bound":
    # 2000 small elementwise ops: each is one kernel launch, the GPU idles between them.
    x = torch.randn(4096, device="cuda")

    def step():
        global x
        for _ in range(1000):
            x = x * 1.0001
            x = x + 0.0001
else:
    # bf16 matmuls: the GPU is busy, launches are few.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def step():
        global a
        for _ in range(20):
            a = (a @ b) * (1.0 / 90.5)  # keeps the values near 1 (8192 ** 0.5 = 90.5)

step()
torch.cuda.synchronize()
times = []
for _ in range(repeats):
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
checksum = float(x.sum()) if kind == "launch_bound" else float(a.float().sum())
print(json.dumps({"workload": kind, "best_s": min(times), "checksum": round(checksum, 3)}))
