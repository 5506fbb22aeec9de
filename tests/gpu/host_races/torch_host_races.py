"""Host races in PyTorch: pinned memory touched by the host while a
`non_blocking=True` copy from or into it is in flight. Each scenario has a racy and a fixed
twin; `dataloader` is a training loop that must be clean in both.

Usage: torch_host_races.py SCENARIO racy|fixed   (list: each scenario and what its racy twin
must be reported as: host-race, or none)
A racy twin prints only what does not depend on timing; a fixed twin prints what it read.
"""
import sys

import torch

N = 1 << 20


def d2h_read(racy):
    """`y = x.to("cpu", non_blocking=True)` read before `torch.cuda.synchronize()`
    (PyTorch issues 127612, 86264; vLLM pull 36013)."""
    x = torch.full((N,), 3.0, device="cuda")
    y = x.to("cpu", non_blocking=True)
    if racy:
        first = y[0].item()
        torch.cuda.synchronize()
        print("read before the synchronize")
    else:
        torch.cuda.synchronize()
        first = y[0].item()
        print("first", first)
    assert y.is_pinned()


def loader_reuse(racy):
    """A hand-written loader that refills one pinned buffer for every batch while the
    previous `copy_(..., non_blocking=True)` from it may be in flight (PyTorch issue 130785);
    fixed: an event recorded after the copy is waited on before the refill."""
    staging = torch.empty(N, pin_memory=True)
    weight = torch.zeros(N, device="cuda")
    copied = torch.cuda.Event()
    batch = torch.empty(N, device="cuda")
    for step in range(1, 5):
        if not racy and step > 1:
            copied.synchronize()
        staging.fill_(float(step))
        batch.copy_(staging, non_blocking=True)
        copied.record()
        weight.add_(batch)
    torch.cuda.synchronize()
    print("refilled 4 times" if racy else f"weight {weight[0].item():.0f}")


def readinto_refill(racy):
    """A loader that reads each batch from a file straight into one pinned staging buffer
    (`readinto` a NumPy view of it) while the previous `copy_(..., non_blocking=True)` from it
    may be in flight; fixed: an event recorded after the copy is waited on before the read.
    The read is a system call: streamsan checks it rather than let the kernel refuse it."""
    import tempfile

    staging = torch.empty(N, pin_memory=True)
    batch = torch.empty(N, device="cuda")
    total = torch.zeros(N, device="cuda")
    copied = torch.cuda.Event()
    with tempfile.TemporaryFile() as f:
        for step in range(1, 5):
            f.write(torch.full((N,), float(step)).numpy().tobytes())
        for step in range(4):
            if not racy and step > 0:
                copied.synchronize()
            f.seek(step * N * 4)
            read = f.readinto(staging.numpy().data)
            assert read == N * 4, read
            batch.copy_(staging, non_blocking=True)
            copied.record()
            total.add_(batch)
    torch.cuda.synchronize()
    print("read 4 batches" if racy else f"total {total[0].item():.0f}")


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, i):
        x = torch.full((64,), float(i % 7))
        return x, x.sum().unsqueeze(0)


def dataloader(racy):
    """A training loop fed by `DataLoader(pin_memory=True)` with `non_blocking=True` copies:
    correct as written, in both twins."""
    del racy
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(Squares(), batch_size=32, pin_memory=True, num_workers=2)
    for epoch in range(2):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.cuda.synchronize()
    print("trained")


SCENARIOS = {
    "d2h_read": ("host-race", d2h_read),
    "loader_reuse": ("host-race", loader_reuse),
    "readinto_refill": ("host-race", readinto_refill),
    "dataloader": ("none", dataloader),
}


def main():
    if sys.argv[1:] == ["list"]:
        for name, (kind, _) in SCENARIOS.items():
            print(name, kind)
        return 0
    name, twin = sys.argv[1:3]
    SCENARIOS[name][1](twin == "racy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
