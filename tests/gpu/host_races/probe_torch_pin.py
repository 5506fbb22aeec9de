# Probe: mprotect a PyTorch pinned tensor's pages, then copy with non_blocking
import ctypes, mmap, signal, torch
libc = ctypes.CDLL(None, use_errno=True)
x = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
p = x.data_ptr(); lo = p & ~4095; n = ((p + x.numel() - lo) + 4095) & ~4095
print("torch pinned", hex(p), "mprotect READ:", libc.mprotect(ctypes.c_void_p(lo), ctypes.c_size_t(n), 1), ctypes.get_errno())
d = x.to("cuda", non_blocking=True); torch.cuda.synchronize()
print("mprotect RW:", libc.mprotect(ctypes.c_void_p(lo), ctypes.c_size_t(n), 3))
y = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True); q = y.data_ptr(); lo2 = q & ~4095
dd = torch.full((1 << 20,), 5, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
print("mprotect NONE:", libc.mprotect(ctypes.c_void_p(lo2), ctypes.c_size_t(n), 0))
y.copy_(dd, non_blocking=True); torch.cuda.synchronize()
print("mprotect RW:", libc.mprotect(ctypes.c_void_p(lo2), ctypes.c_size_t(n), 3), "data ok:", bool((y == 5).all()))
