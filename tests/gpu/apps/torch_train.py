# PyTorch: a small training loop (forward, backward, optimizer) whose batches are copied to
# the GPU on a side stream ahead of use. Correct: the main stream waits for the side stream
# (wait_stream) and the batch is marked as used on the main stream (record_stream), so the
# allocator does not hand its memory back to the side stream too early.
# Usage: torch_train.py clean|missing_wait_stream|dropped_record_stream
# Run it with the native caching allocator and with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync.
import sys
import torch

mode = sys.argv[1]
torch.manual_seed(0)
main, side = torch.cuda.current_stream(), torch.cuda.Stream()
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [torch.randn(256, 512).pin_memory() for _ in range(4)]
labels = [torch.randint(0, 10, (256,)).pin_memory() for _ in range(4)]


def prefetch(i):
    with torch.cuda.stream(side):
        return batches[i % 4].to("cuda", non_blocking=True), labels[i % 4].to("cuda", non_blocking=True)


x, y = prefetch(0)
for step in range(40):
    if mode != "missing_wait_stream":
        main.wait_stream(side)
    if mode != "dropped_record_stream":
        x.record_stream(main)
        y.record_stream(main)
    cur_x, cur_y = x, y
    x, y = prefetch(step + 1)          # overlaps with this step's compute
    loss = torch.nn.functional.cross_entropy(model(cur_x), cur_y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    del cur_x, cur_y                   # freed on the side stream, their allocation stream
torch.cuda.synchronize()
print("torch_train:", mode, "done" if mode != "clean" else f"loss {loss.item():.3f}")
