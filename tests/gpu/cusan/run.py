#!/usr/bin/env python3
"""CuSan's runtime tests (tudasc/cusan, test/runtime/, the ones that need no MPI) under streamsan.

CuSan's sources are not in this repository: run.sh takes them from .cusan/ (git-ignored) and
says how to fill it. Each test is built as its lit RUN lines build it, with plain nvcc in
place of CuSan's compiler wrapper: the plain variant and, where the RUN lines have one, the
-DCUSAN_SYNC variant. Where a test has both, CuSan's lit checks say the plain variant has a
data race and the -DCUSAN_SYNC variant has none; a test with one variant has none. Every
variant runs natively once, then under `streamsan run --exitcode 0 --host-races` (host races
are off by default, and most of CuSan's races are the host reading managed memory), with the
other options at their defaults (and whatever STREAMSAN_OPTIONS says).

A case passes when the race kinds of its report are exactly those of EXPECTED (written from
reading each test before any run: a racy variant's race, a fixed variant's silence, and
DISAGREEMENTS where streamsan's rule and CuSan's test part) and its exit status is the native
one. Whether the native run printed CuSan's "[Error] sync" (the race showing in the values
read) is kept beside it, as evidence, and checked by nothing.

Writes result-cusan.json (tests/gpu/result.py), cusan.json (every variant: build, native and
streamsan exits, the races with their hazard, APIs and kernels, notes) and cusan.log (every
command's output) into OUT_DIR.
Usage: run.py STREAMSAN CUSAN_DIR BUILD_DIR OUT_DIR
CUSAN_ARCH (native) is nvcc's -arch; CUSAN_JOBS (4) how many variants build and run at once.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from result import Result, kinds_text, short_kernel  # noqa: E402

HOST = "host-race"
CROSS = "cross-stream-race"

# What each variant must be reported as: "plain" is the variant built without -DCUSAN_SYNC
# (racy where the test has a "sync" variant), "sync" the one built with it. Managed memory
# (cudaMallocManaged) is written by a kernel and read by the host: a host-race unless the host
# synchronized with the kernel. The legacy default stream orders blocking streams, not
# non-blocking ones; a synchronous memset of managed memory, a synchronous copy to the host
# and a successful stream or event query make the host wait (docs/semantics.md).
EXPECTED = {
    # Host reads managed memory a kernel on the legacy stream writes; fix: event synchronize.
    "02_event": {"plain": HOST, "sync": "clean"},
    # Host-to-host cudaMemcpy of registered memory onto itself: nothing on the device.
    "09_cudamemcpy_default": {"plain": "clean"},
    # Pinned allocations, no device work.
    "10_cudahostalloc": {"plain": "clean"},
    # kernel3 on stream1 writes buff2 while kernel3 and kernel2 on stream2 write it;
    # fix: cudaDeviceSynchronize before it. The kernels take both buffers in a struct.
    "11_struct_of_buff": {"plain": CROSS, "sync": "clean"},
    # The same, the buffers in a struct of structs.
    "13_struct_recursion": {"plain": CROSS, "sync": "clean"},
    # 02_event with a __host__ __device__ lambda writing the managed memory.
    "14_cuda_functor": {"plain": HOST, "sync": "clean"},
    # Host reads managed memory written on stream1 after synchronizing stream2 (both blocking);
    # fix: a cudaMemset on the legacy stream between the launches orders stream1 before stream2.
    "15_cuda_memset_sync": {"plain": HOST, "sync": "clean"},
    # As 15 with stream1 non-blocking, so the legacy memset orders nothing; fix: synchronize stream1.
    "15_cuda_memset_sync_nonblocking": {"plain": HOST, "sync": "clean"},
    # A copy on stream2 reads what a kernel on stream1 writes (two blocking streams); CuSan's
    # fix puts a cudaMallocManaged between them: see DISAGREEMENTS.
    "16_cuda_hostalloc_implicit_sync": {"plain": CROSS, "sync": CROSS},
    # The same, with cudaMalloc between them.
    "16_cuda_malloc_implicit_sync": {"plain": CROSS, "sync": CROSS},
    # Host reads managed memory a kernel on stream1 writes; fix: cudaStreamQuery busy loop.
    "17_cuda_stream_query_busy_loop": {"plain": HOST, "sync": "clean"},
    # The same; fix: cudaEventQuery busy loop on an event recorded after the kernel.
    "18_cuda_event_query_busy_loop": {"plain": HOST, "sync": "clean"},
    # The same with a cudaEventBlockingSync event.
    "18_cuda_event_with_flags_query_busy_loop": {"plain": HOST, "sync": "clean"},
    # A copy on stream2 reads what a kernel on stream1 writes (blocking streams); fix: a
    # synchronous host-to-host cudaMemcpy between them, on the legacy stream.
    "19_cuda_cudaMemcpyAsyncH2H_implicit_sync": {"plain": CROSS, "sync": "clean"},
    # As 19 with non-blocking streams, the legacy copy in both variants; fix: synchronize stream1.
    "19_cuda_cudaMemcpyAsyncH2H_implicit_sync_nonblocking": {"plain": CROSS, "sync": "clean"},
    # Host reads managed memory written on stream1, unsynchronized; fix: synchronize the legacy
    # stream, whose kernel waited for stream1.
    "20_cuda_default_stream_sync": {"plain": HOST, "sync": "clean"},
    # Host reads managed memory a legacy-stream kernel writes, unsynchronized; fix: synchronize
    # a blocking stream whose later kernel waited for the legacy one.
    "23_cuda_default_stream_post_sync": {"plain": HOST, "sync": "clean"},
    # Host synchronizes only a non-blocking stream; fix: cudaDeviceSynchronize.
    "23_cuda_default_stream_post_sync_nonblocking": {"plain": HOST, "sync": "clean"},
    # The kernel runs on a non-blocking stream and the host synchronizes the legacy stream; fix:
    # a blocking stream, which the legacy stream waits for.
    "24_cuda_sync_stream_default_nonblocking": {"plain": HOST, "sync": "clean"},
    # Host reads managed memory written on stream1, unsynchronized; fix: synchronize stream2,
    # whose kernel waited for a legacy kernel that waited for stream1.
    "25_cuda_default_stream_double_sync": {"plain": HOST, "sync": "clean"},
    # A 2D copy on stream2 reads a pitched buffer a kernel on stream1 writes; fix: a
    # synchronous cudaMemcpy2D on the legacy stream between them.
    "27_cuda_memcpy2d_implicit_syn": {"plain": CROSS, "sync": "clean"},
    # The same; fix: a cudaMemset2D on the legacy stream between them.
    "28_cuda_memset2d_implicit_syn": {"plain": CROSS, "sync": "clean"},
    # A copy on stream2 reads what a kernel on stream1 writes; fix: synchronize stream1.
    "32_tsan_async_copy": {"plain": CROSS, "sync": "clean"},
    # Kernels on stream1 and stream2 read and write one buffer; fix: the host synchronizes an
    # event recorded after the first before launching the second.
    "31_tsan_cuda_event": {"plain": CROSS, "sync": "clean"},
    # A kernel on stream2 reads what a kernel on stream1 writes; fix: stream2 waits for an
    # event recorded after the writer.
    "33_tsan_wait_event": {"plain": CROSS, "sync": "clean"},
    # Host reads managed memory a legacy-stream kernel writes through a pointer it loads from
    # managed memory (data[-1]); fix: cudaDeviceSynchronize. CuSan marks it XFAIL.
    "34_negative_array": {"plain": HOST, "sync": "clean"},
    # Host reads managed memory a legacy-stream kernel writes through a by-value struct;
    # fix: cudaDeviceSynchronize.
    "35_struct_null": {"plain": HOST, "sync": "clean"},
}

# Where streamsan's rule and CuSan's test part: the test's -DCUSAN_SYNC variant relies on an
# allocation between two streams' operations to order them. CUDA promises no such order, and
# streamsan orders only by what CUDA promises (docs/semantics.md, "a race that can happen is a
# race"). CuSan itself marks both tests XFAIL. The Programming Guide does describe what the
# implementation does ("Managing memory allocations using cudaMalloc and cudaFree causes the
# GPU to synchronize across all executing CUDA streams", of the stream-ordered allocator; its
# older "Implicit Synchronization" lists "a device memory allocation"), as a cost, not an order
# the API reference gives a program.
_ALLOCATION = ('CUDA Driver API, "API synchronization behavior": "Any CUDA API call may block or '
               'synchronize for various reasons such as contention for or unavailability of internal '
               'resources. Such behavior is subject to change and undocumented behavior should not be '
               'relied upon." The references of cudaMalloc and cudaMallocManaged promise no ordering '
               'with any stream.')
DISAGREEMENTS = {
    ("16_cuda_hostalloc_implicit_sync", "sync"): "CuSan: clean (cudaMallocManaged orders the streams). " + _ALLOCATION,
    ("16_cuda_malloc_implicit_sync", "sync"): "CuSan: clean (cudaMalloc orders the streams). " + _ALLOCATION,
}

# Cases streamsan is known to miss or to report wrongly, named in a failing case's note so that
# a reader tells a known gap from a new one; a line goes when its gap is closed.
KNOWN_GAPS = {}


def variants_of(path):
    """The variants the test's RUN lines build: plain, and sync where one passes -DCUSAN_SYNC."""
    runs = [line for line in open(path, errors="replace") if re.match(r"\s*//\s*RUN:", line)]
    return ["plain"] + (["sync"] if any("-DCUSAN_SYNC" in line for line in runs) else [])


def needs_mpi(path):
    """Whether the test needs MPI: built by CuSan's MPI wrapper, run by mpiexec, marked
    `REQUIRES: mpi`, or including an MPI header (some others name one in a comment only)."""
    text = open(path, errors="replace").read()
    return re.search(r"%wrapper-mpic|%mpi-exec|REQUIRES:.*\bmpi\b|^\s*#\s*include.*mpi", text, re.M) is not None


class Log:
    """cusan.log, written a command at a time from several threads."""

    def __init__(self, path):
        self.file = open(path, "w")
        self.lock = threading.Lock()

    def run(self, cmd, timeout=180):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            code, stdout, stderr = "timeout", _text(e.stdout), _text(e.stderr) + f"\n(stopped after {timeout} s)"
        with self.lock:
            self.file.write(f"$ {' '.join(cmd)}\n# exit {code}\n{stdout}{stderr}\n")
            self.file.flush()
        return code, stdout, stderr


def _text(data):
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def races_of(report_dir):
    """The races and note kinds of every report in the folder; None if there is none."""
    files = sorted(f for f in os.listdir(report_dir) if f.endswith(".json"))
    if not files:
        return None, []
    races, notes = [], []
    for name in files:
        with open(os.path.join(report_dir, name)) as f:
            report = json.load(f)
        races += report["races"]
        notes += [n["kind"] for n in report.get("notes", [])]
    return races, sorted(set(notes))


def race_summary(race):
    """A race as cusan.json keeps it: its kind, hazard, the two sides' APIs and kernels, the
    buffer's kind."""
    side = lambda s: short_kernel(s.get("kernel")) or s.get("api")  # noqa: E731
    return {"kind": race["kind"], "hazard": race.get("hazard"), "first": side(race["first"]),
            "second": side(race["second"]), "buffer": race.get("buffer", {}).get("kind")}


def judge(name, variant, expected, built, native_code, under_code, races):
    """The observed text and the failures of one variant."""
    if built is not True:
        return "not built", [f"build failed: {built}"]
    if races is None:
        return "no report", [f"streamsan wrote no report (exit {under_code})"]
    kinds = sorted({r["kind"] for r in races})
    hazards = sorted({r["hazard"] for r in races if r.get("hazard")})
    observed = kinds_text(kinds, expected) + (f" ({', '.join(hazards)})" if hazards else "")
    failures = []
    want = set() if expected == "clean" else set(expected.split(","))
    if set(kinds) != want:
        failures.append(f"expected {expected}, reported {kinds_text(kinds, expected)}")
    if native_code != under_code:
        failures.append(f"exit {native_code} natively, {under_code} under streamsan")
    if failures and (name, variant) in KNOWN_GAPS:
        failures.append(KNOWN_GAPS[(name, variant)])
    return observed, failures


def main():
    streamsan, source, build, out = sys.argv[1:5]
    arch = os.environ.get("CUSAN_ARCH", "native")
    jobs = int(os.environ.get("CUSAN_JOBS", "4"))
    log = Log(os.path.join(out, "cusan.log"))
    result = Result("cusan")
    # Which CuSan the tests came from (run.sh pins the one EXPECTED was written from).
    commit_file = os.path.join(source, "COMMIT")
    commit = open(commit_file).read().strip() if os.path.exists(commit_file) else "unknown"
    result.note = f"CuSan's test/runtime at commit {commit}, built with nvcc -O1 -g -arch={arch}"

    present = {f[:-2] for f in os.listdir(source) if f.endswith(".c")}
    unlisted = sorted(n for n in present - set(EXPECTED) if not needs_mpi(os.path.join(source, f"{n}.c")))
    missing = sorted(set(EXPECTED) - present)
    work = []
    for name in sorted(EXPECTED):
        if name in missing:
            continue
        found = variants_of(os.path.join(source, f"{name}.c"))
        for variant in sorted(set(found) | set(EXPECTED[name])):
            work.append((name, variant, variant in found))

    def build_one(name, variant):
        exe = os.path.join(build, name + ("-sync" if variant == "sync" else ""))
        # CuSan's RUN lines: clang -x cuda -O1 with its wrapper; plain nvcc builds the same
        # source for this GPU (the tests' sm_70 code would not load on a newer one), with
        # frames for the report and extended lambdas for 14_cuda_functor.
        # clang's CUDA headers bring stdio.h, which 33_tsan_wait_event's kernel printf needs.
        cmd = ["nvcc", "-x", "cu", "-O1", "-g", f"-arch={arch}", "--extended-lambda", "-include", "stdio.h"] + \
              (["-DCUSAN_SYNC"] if variant == "sync" else []) + ["-o", exe, os.path.join(source, f"{name}.c")]
        code, _, stderr = log.run(cmd, timeout=300)
        return exe, True if code == 0 else (stderr.strip().splitlines() or [f"exit {code}"])[-1]

    def run_one(item):
        name, variant, in_run_lines = item
        expected = EXPECTED[name].get(variant)
        if expected is None or not in_run_lines:
            return {"case": f"{name}/{variant}", "expected": expected or "(not in the table)",
                    "observed": "in the table" if in_run_lines else "not in the test's RUN lines",
                    "failures": ["the table and the test's RUN lines differ"]}
        exe, built = build_one(name, variant)
        native_code = under_code = None
        native_out = under_out = ""
        races, notes = None, []
        if built is True:
            native_code, native_out, _ = log.run([exe])
            report_dir = os.path.join(build, "reports", f"{name}-{variant}")
            os.makedirs(report_dir, exist_ok=True)
            under_code, under_out, _ = log.run([streamsan, "run", "--exitcode", "0", "--host-races", "--report",
                                                os.path.join(report_dir, "report.%p.json"), "--", exe])
            races, notes = races_of(report_dir)
        observed, failures = judge(name, variant, expected, built, native_code, under_code, races)
        note = "; ".join(failures) or None
        if (name, variant) in DISAGREEMENTS:
            note = "; ".join(filter(None, [note, DISAGREEMENTS[(name, variant)]]))
        return {"case": f"{name}/{variant}", "expected": expected, "observed": observed,
                "failures": failures, "note": note, "built": built, "native_exit": native_code,
                "streamsan_exit": under_code, "native_shows_race": "[Error] sync" in native_out,
                "under_shows_race": "[Error] sync" in under_out, "notes": notes,
                "races": [race_summary(r) for r in races or []]}

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(run_one, work))
    for name in missing:
        rows.append({"case": f"{name}/*", "expected": "the test in the folder", "observed": "missing",
                     "failures": [f"{name}.c is not in {source}"]})
    for name in unlisted:
        rows.append({"case": f"{name}/*", "expected": "a row of EXPECTED", "observed": "none",
                     "failures": [f"{name}.c needs no MPI and has no expectation: read it and add one"]})

    for row in rows:
        ok = not row["failures"]
        result.case(row["case"], row["expected"], row["observed"], ok=ok,
                    note=row.get("note", "; ".join(row["failures"]) or None))
        shown = " [natively: [Error] sync]" if row.get("native_shows_race") else ""
        print(f"{'ok  ' if ok else 'FAIL'} {row['case']}: expected {row['expected']}, "
              f"reported {row['observed']}{shown} {row['failures'] or ''}", flush=True)
    with open(os.path.join(out, "cusan.json"), "w") as f:
        json.dump({"cusan_dir": source, "cusan_commit": commit, "arch": arch, "cases": rows}, f, indent=1)
    status = result.write(out)
    passed = sum(not r["failures"] for r in rows)
    disagreements = sum(r["case"] in {f"{n}/{v}" for n, v in DISAGREEMENTS} for r in rows)
    print(f"{passed} of {len(rows)} cases passed ({disagreements} expected as streamsan's rule has "
          f"them where CuSan's test disagrees)")
    return status


if __name__ == "__main__":
    sys.exit(main())
