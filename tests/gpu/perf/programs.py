"""The programs whose step time the overhead comparison measures (run.py), each built from a
config or random weights (nothing downloaded), each a real program's loop: a transformers GPT-2
training step, a timm ResNet-18 fed by a side-stream prefetcher, a torch.compile'd MLP, a
torchvision Mask R-CNN inference, a torch_geometric GCN training step, a DDP (NCCL) training
step of a TransformerEncoder on one rank, and two synthetic loops (2000 small elementwise
launches; bf16 matmuls).

Usage: programs.py NAME [STEPS] [WARMUP]. Prints one JSON line: {"program", "step_ms" (each
timed step, synchronized), "host_ms" (each step's part before the synchronize: where the host's
launches, not the device's work, set the pace, it is the whole step), "probe_ms" (the core's
speed before and after each step: probe()), "median_step_ms", "checksum"} — the checksum is a
loss or sum, printed to show the work was done; bf16 and atomics make it differ slightly
between runs.

STREAMSAN_TOGGLE="0,1,14" (under a shim built with the `experiments` feature): before each
timed step, the parts of the shim that step leaves out (shim/src/intercept/experiments.rs's
bits), cycling through the list in a shuffled order; the JSON line then has "modes", each
step's.
"""
import json
import os
import random
import statistics
import sys
import time

import torch

DEV = "cuda"


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=256)
    model = GPT2LMHeadModel(cfg).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (8, 256), device=DEV)

    def step():
        with torch.autocast(DEV, dtype=torch.bfloat16):
            loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def resnet18_prefetch():
    # The pattern of ../shared/cases/timm_prefetch.py: pinned batches copied non_blocking on a
    # side stream, the compute stream waits for it and records the tensors' use.
    import timm
    m = timm.create_model("resnet18", pretrained=False, num_classes=100).to(DEV).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler()
    host = [(torch.randn(64, 3, 128, 128).pin_memory(), torch.randint(0, 100, (64,)).pin_memory()) for _ in range(4)]
    side = torch.cuda.Stream()
    state = {"i": 0}

    def prefetch():
        x, y = host[state["i"] % 4]
        state["i"] += 1
        with torch.cuda.stream(side):
            return x.to(DEV, non_blocking=True).contiguous(memory_format=torch.channels_last), y.to(DEV, non_blocking=True)
    state["next"] = prefetch()

    def step():
        cur = torch.cuda.current_stream()
        cur.wait_stream(side)
        x, y = state["next"]
        x.record_stream(cur)
        y.record_stream(cur)
        state["next"] = prefetch()
        with torch.autocast(DEV, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


def compiled_mlp():
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    model = torch.compile(torch.nn.Sequential(*layers).to(DEV))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device=DEV)

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def maskrcnn():
    import torchvision
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None).to(DEV).eval()
    images = [torch.rand(3, 480, 640, device=DEV) for _ in range(2)]

    def step():
        with torch.no_grad():
            out = model(images)
        return sum(o["boxes"].sum() for o in out) if out else torch.zeros(())
    return step


def gcn():
    from torch_geometric.nn import GCNConv
    g = torch.Generator().manual_seed(0)
    nodes, edges = 20_000, 200_000
    x = torch.randn(nodes, 128, generator=g).to(DEV)
    edge_index = torch.randint(0, nodes, (2, edges), generator=g).to(DEV)
    y = torch.randint(0, 10, (nodes,), generator=g).to(DEV)
    conv1, conv2 = GCNConv(128, 128).to(DEV), GCNConv(128, 10).to(DEV)
    opt = torch.optim.Adam(list(conv1.parameters()) + list(conv2.parameters()), lr=0.01)

    def step():
        h = torch.relu(conv1(x, edge_index))
        loss = torch.nn.functional.cross_entropy(conv2(h, edge_index), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def ddp():
    # DistributedDataParallel over NCCL around a 4-layer TransformerEncoder: one process per
    # GPU of this machine would need a launcher, so this is one rank (world size 1) on one GPU:
    # DDP's reducer still all-reduces every gradient bucket through NCCL on NCCL's stream,
    # ordered with the compute stream by events, as in the two-GPU run.
    import socket
    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.TransformerEncoder(layer, num_layers=4).to(DEV), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.randn(16, 128, 512, device=DEV, generator=g)

    def step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def launch_bound():
    # 2000 small elementwise ops: each is one kernel launch, the GPU idles between them.
    state = {"x": torch.randn(4096, device=DEV)}

    def step():
        x = state["x"]
        for _ in range(1000):
            x = x * 1.0001
            x = x + 0.0001
        state["x"] = x
        return x.sum()
    return step


def compute_bound():
    # 20 bf16 8192² matmuls: the GPU is busy, launches are few.
    b = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    state = {"a": torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)}

    def step():
        a = state["a"]
        for _ in range(20):
            a = (a @ b) * (1.0 / 90.5)  # keeps the values near 1 (8192 ** 0.5 = 90.5)
        state["a"] = a
        return a.float().sum()
    return step


PROGRAMS = {f.__name__: f for f in (gpt2, resnet18_prefetch, compiled_mlp, maskrcnn, gcn, ddp, launch_bound, compute_bound)}


def probe():
    """How fast the main thread's core runs now: a fixed pure-Python loop (no driver call),
    timed, in ms. The GPU machine's cores switch between two speeds, within a process and
    between processes, and a step's time with them: run.py compares steps taken at full
    speed."""
    start = time.perf_counter()
    sum(i * i for i in range(30_000))
    return round((time.perf_counter() - start) * 1e3, 3)


def toggled_modes(steps):
    """With STREAMSAN_TOGGLE set: each timed step's parts to leave out (the list's entries,
    shuffled anew each cycle, so that no mode keeps one place in it, and in another order in
    each process, so that no mode follows another more often in every process: the order is
    in the JSON line) and the preloaded shim's function that leaves them out; ([], None)
    without it."""
    toggle = [int(m) for m in os.environ.get("STREAMSAN_TOGGLE", "").split(",") if m]
    if not toggle:
        return [], None
    import ctypes
    leave_out = ctypes.CDLL(None).streamsan_experiment
    leave_out.argtypes = [ctypes.c_uint32]
    shuffle, modes = random.Random(os.getpid()), []
    while len(modes) < steps:
        cycle = list(toggle)
        shuffle.shuffle(cycle)
        modes += cycle
    return modes[:steps], leave_out


def main():
    name = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    torch.manual_seed(0)
    step = PROGRAMS[name]()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times, host, probes = [], [], []
    modes, leave_out = toggled_modes(steps)
    for i in range(steps):
        if leave_out:
            leave_out(modes[i])
        before = probe()
        start = time.perf_counter()
        result = step()
        # The host's part: the step's launches made, its device work perhaps still running.
        host.append((time.perf_counter() - start) * 1e3)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        probes.append([before, probe()])
    print(json.dumps({"program": name, "step_ms": [round(t, 4) for t in times],
                      "host_ms": [round(t, 4) for t in host], "probe_ms": probes,
                      "median_step_ms": round(statistics.median(times), 4), "checksum": round(float(result), 3),
                      **({"modes": modes} if modes else {})}))


if __name__ == "__main__":
    main()
