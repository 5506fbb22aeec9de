"""PyTorch tests of this repository's own for `pytest --streamsan` on a GPU (tests/gpu/pytest):
one with a race between a side stream and the default stream, one with the wait that fixes
it, and one with no GPU work. Only the racy test may fail, with its race naming it."""
import torch

N = 1 << 20


def test_side_stream_result_read_without_a_wait():
    x = torch.zeros(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.fill_(1.0)
    y = x * 2  # the default stream reads x while the side stream may still write it
    torch.cuda.synchronize()
    assert y.shape == x.shape


def test_side_stream_result_read_after_a_wait():
    x = torch.zeros(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.fill_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    y = x * 2
    torch.cuda.synchronize()
    assert float(y[0]) == 2.0


def test_no_gpu_work():
    assert sum(range(10)) == 45
