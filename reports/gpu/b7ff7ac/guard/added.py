# What the guard adds a step, from --phase-times' table of intercepted entry points (the
# driver included): for each pair of processes, guard off and on, the difference of their
# entry points' total time over the steps both made, by entry point and in all. Entry points
# are compared, not step times: the two processes' cores can run at different speeds
# (probe_ms), which moves a step by more than the guard does.
# usage: python3 added.py OFF.txt ON.txt [STEPS]
import re, sys

def entry_points(path):
    rows, inside = {}, False
    for line in open(path):
        if "time per intercepted entry point" in line:
            inside = True
            continue
        if inside:
            m = re.match(r"\s+(cu\w+)\s+(\d+)\s+([\d.]+)\s+\d+$", line)
            if m:
                rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
            elif rows:
                break
    return rows

off, on = entry_points(sys.argv[1]), entry_points(sys.argv[2])
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 305
diffs = sorted(((on.get(k, (0, 0))[1] - off.get(k, (0, 0))[1], k) for k in set(off) | set(on)), reverse=True)
# Loading and start-up (cuInit, cuLibraryLoadData, ...) move by tens of ms either way: left out.
skip = {"cuInit", "cuLibraryLoadData", "cuModuleLoadData", "cuDevicePrimaryCtxRetain", "cuMemHostAlloc",
        "cuMemAlloc_v2", "cuLibraryUnload", "cuMemFreeHost", "cuStreamCreate", "cuStreamCreateWithPriority"}
total = 0.0
for ms, name in diffs:
    if name in skip:
        continue
    total += ms
    if abs(ms) >= 1:
        print(f"  {name:28} {ms:+9.1f} ms  ({off.get(name, (0, 0))[0]} calls)")
print(f"added by the guard: {total:+.1f} ms over {steps} steps, {total / steps:+.3f} ms a step")
