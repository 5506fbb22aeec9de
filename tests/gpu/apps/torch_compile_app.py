# PyTorch: torch.compile (Inductor, Triton kernels) training steps. Clean.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).cuda()
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 256, device="cuda"), torch.randint(0, 10, (128,), device="cuda")
for _ in range(20):
    loss = torch.nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"torch_compile: loss {loss.item():.3f}")
