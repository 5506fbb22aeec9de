# Which threads query events in a PyTorch training loop with record_stream (the prefetcher of
# ../shared/cases/timm_prefetch.py, as tests/gpu/perf/programs.py runs it), under the tracing shim.
sh tests/gpu/provenance.sh
echo "trace shim sha256: $(sha256sum .device-trace/libstreamsan_shim.so | cut -d' ' -f1)"
STREAMSAN_TRACE=1 STREAMSAN_SHIM=$PWD/.device-trace/libstreamsan_shim.so STREAMSAN_OPTIONS=exitcode=0 \
  .device/streamsan run --report /tmp/alloc.%p.json -- python3 tests/gpu/perf/programs.py resnet18_prefetch 20 5 > /tmp/alloc.txt 2>&1
echo "rc=$?"; grep -v '^trace' /tmp/alloc.txt | tail -5
python3 - <<'PY'
import collections
q = collections.Counter(); first = None; threads = collections.Counter()
for l in open('/tmp/alloc.txt'):
    if not l.startswith('trace '): continue
    _, tid, t, what = l.rstrip('\n').split(None, 3)
    first = first or tid
    threads[tid] += 1
    if what.startswith('event_query') or what.startswith('stream_query') or what.startswith('event_synchronize') or what.startswith('stream_synchronize'):
        q[(tid, what.split()[0], what.split()[-1])] += 1
print("trace lines by thread:", dict(threads))
for (tid, call, status), n in sorted(q.items()):
    print(f"thread {tid}{' (first traced)' if tid == first else ''}: {call} -> {status}: {n}")
PY
