# Workloads for the footprint cost comparison (perf.py). Prints one JSON line: the time of
# each warm-up step and of each timed step after them (the warm-up's show how fast
# footprint=learn settles). Usage: workload.py gpt2|resnet|numba WARMUP STEPS
import json
import sys
import time

kind, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

if kind == "numba":
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda

    @cuda.jit
    def axpy(out, a, x, y):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = a * x[i] + y[i]

    n = 1 << 20
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    y = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)

    def step():
        for _ in range(200):
            axpy[n // 256, 256](out, 0.5, x, y)
            axpy[n // 256, 256](y, 0.5, out, x)
        cuda.synchronize()
else:
    import torch
    torch.manual_seed(0)
    if kind == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=256, vocab_size=8192)
        model = GPT2LMHeadModel(config).cuda()
        data = torch.randint(0, 8192, (8, 256), device="cuda")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            loss = model(data, labels=data).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
    else:
        import torchvision
        model = torchvision.models.resnet18(num_classes=100).cuda()
        data = torch.randn(32, 3, 224, 224, device="cuda")
        labels = torch.randint(0, 100, (32,), device="cuda")
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(data), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()

def timed(count):
    times = []
    for _ in range(count):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times

warmup_s = timed(warmup)
print(json.dumps({"workload": kind, "warmup_s": warmup_s, "step_s": timed(steps)}))
