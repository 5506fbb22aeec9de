# PyTorch: CUDA graph capture (torch.cuda.graph) of a forward pass, warmed up on a side
# stream, replayed with new inputs copied into the static input. Clean.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).cuda()
static_x = torch.randn(64, 256, device="cuda")
warmup = torch.cuda.Stream()
warmup.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warmup), torch.no_grad():
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(warmup)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph), torch.no_grad():
    static_y = model(static_x)
total = 0.0
inputs = [torch.randn(64, 256, device="cuda") for _ in range(4)]
for i in range(20):
    static_x.copy_(inputs[i % 4])
    graph.replay()
    total += static_y.sum().item()
print(f"torch_graph: {total:.2f}")
