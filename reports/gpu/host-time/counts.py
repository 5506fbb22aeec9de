"""Work rather than time: the user-space instructions and cycles each thread of a program
retires per step, from hardware counters (perf_event_open, one per thread present after the
warm-up: the program's, torch's and streamsan's), natively and under streamsan alike.
Instructions do not depend on how fast the core a thread landed on runs; time does.
Usage: counts.py PROGRAM STEPS WARMUP. Prints one JSON line, or the error opening a counter."""
import ctypes
import json
import os
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/gpu/perf"))
import programs  # noqa: E402
import torch  # noqa: E402

PERF_TYPE_HARDWARE, CYCLES, INSTRUCTIONS = 0, 0, 1
EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 5, 1 << 6
libc = ctypes.CDLL(None, use_errno=True)


def counter(config, tid):
    attr = bytearray(128)  # struct perf_event_attr: type, size, config; flags at offset 40
    struct.pack_into("IIQ", attr, 0, PERF_TYPE_HARDWARE, 128, config)
    struct.pack_into("Q", attr, 40, EXCLUDE_KERNEL | EXCLUDE_HV)
    fd = libc.syscall(298, (ctypes.c_char * 128).from_buffer(attr), tid, -1, -1, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fd


def read(fd):
    return struct.unpack("Q", os.read(fd, 8))[0]


name, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
step = programs.PROGRAMS[name]()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
threads = {}
try:
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            threads[int(tid)] = (f.read().strip(), counter(INSTRUCTIONS, int(tid)), counter(CYCLES, int(tid)))
except OSError as e:
    print(json.dumps({"program": name, "error": f"perf_event_open: {e}",
                      "paranoid": open("/proc/sys/kernel/perf_event_paranoid").read().strip()}))
    sys.exit(0)
before = {tid: (read(i), read(c)) for tid, (_, i, c) in threads.items()}
times = []
for _ in range(steps):
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - start) * 1e3)
per_thread = []
for tid, (tname, i, c) in threads.items():
    di, dc = read(i) - before[tid][0], read(c) - before[tid][1]
    if di or dc:
        per_thread.append({"name": tname, "instructions_M": round(di / steps / 1e6, 3), "cycles_M": round(dc / steps / 1e6, 3)})
per_thread.sort(key=lambda t: -t["instructions_M"])
print(json.dumps({"program": name, "steps": steps, "median_step_ms": round(statistics.median(times), 3),
                  "instructions_M_per_step": round(sum(t["instructions_M"] for t in per_thread), 3),
                  "cycles_M_per_step": round(sum(t["cycles_M"] for t in per_thread), 3), "threads": per_thread}))
