# For each traced run (trace.tgz, unpacked): the time from the all_reduce's push to the read's
# launch, the launch in the driver, the read's push after it, and the watchdog's first query.
# usage: python3 windows.py trace/*/out.txt
import sys
for path in sys.argv[1:]:
    lines = [l.split(None, 3) for l in open(path) if l.startswith("trace ")]
    i = [k for k, l in enumerate(lines) if "ncclAllReduce" in l[3]][-1]
    j = next(k for k in range(i, len(lines)) if lines[k][3].startswith("before cuLaunch"))
    reduce_at, before, after, pushed = (float(lines[k][2]) for k in (i, j, j + 1, j + 2))
    queries = [float(l[2]) for l in lines if l[3].startswith("event_query")]
    first = min([q for q in queries if q > reduce_at] or [reduce_at])
    print(f"{path}: all_reduce to the read's launch {1e3 * (before - reduce_at):.1f} ms, launch "
          f"{1e3 * (after - before):.2f} ms, push {1e3 * (pushed - after):.2f} ms after it; "
          f"watchdog's first query {1e3 * (first - reduce_at):.1f} ms after the all_reduce ({len(queries)} in all)")
