# PyTorch: the second half of x (a view whose pointer is inside x) read on a side stream
# while the default stream still writes all of x. Usage: torch_view.py racy|fixed
import sys
import torch

fixed = sys.argv[1] == "fixed"
n = 1 << 22
x = torch.zeros(n, device="cuda")
torch.cuda.synchronize()
side = torch.cuda.Stream()
x.mul_(3.0).add_(1.0)                 # default stream: writes all of x
if fixed:
    side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    s = x[n // 2:].sum()              # side stream: reads the second half
side.synchronize()
torch.cuda.synchronize()
print("torch_view", sys.argv[1], float(s))
