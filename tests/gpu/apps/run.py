#!/usr/bin/env python3
"""Real programs on a GPU machine, natively and under streamsan.

Clean workloads must give no race; each racy version (one wait removed) must be reported
with exactly the expected kinds (a missing wait often shows as more than one: a buffer used
before its allocation is ordered is also raced on by its writer). For each run: same exit status and output as natively (racy
versions print nothing timing-dependent; the last output line is the result compared, lines
before it may hold timings), whether a race's call site reaches the program's
own source, and wall times. Writes result-apps.json (tests/gpu/result.py), real-apps.json and
real-apps.log; exits 1 when a program is not as expected.
Usage: run.py STREAMSAN CUDARC_APP OUT_DIR [WORD...]  (WORDs: run only programs whose
name or framework contains one of them). The DDP programs (torch_ddp.py) run one rank per GPU,
two at most; on a machine with two GPUs, Warp's multi-GPU scenarios (warp_multi_gpu.py) too.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result, kinds_text  # noqa: E402
PY = sys.executable
ASYNC = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}


def cases(cudarc_app):
    t = lambda mode: [PY, f"{HERE}/torch_train.py", mode]
    c = lambda pool, mode: [PY, f"{HERE}/cupy_app.py", pool, mode]
    # Each racy version's kinds follow from what it does. Under a stream-ordered allocator a
    # buffer allocated on one stream and used on another with no wait is a use-before-alloc,
    # and a cross-stream race too where the allocating stream also wrote it (a copy, a memset,
    # a fill); a stream-ordered free with no wait for a use is a free-race. Under a caching
    # allocator the driver sees neither, and the same mistake is a cross-stream race on the
    # reused memory.
    return [
        # program, framework, allocator, command, env, expected
        ("torch_train clean", "pytorch", "native", t("clean"), {}, "clean"),
        ("torch_train missing_wait_stream", "pytorch", "native", t("missing_wait_stream"), {}, "cross-stream-race"),
        ("torch_train dropped_record_stream", "pytorch", "native", t("dropped_record_stream"), {}, "cross-stream-race"),
        ("torch_train clean", "pytorch", "cudaMallocAsync", t("clean"), ASYNC, "clean"),
        ("torch_train missing_wait_stream", "pytorch", "cudaMallocAsync", t("missing_wait_stream"), ASYNC, "use-before-alloc,cross-stream-race"),
        ("torch_train dropped_record_stream", "pytorch", "cudaMallocAsync", t("dropped_record_stream"), ASYNC, "free-race"),
        ("torch_graph", "pytorch", "native", [PY, f"{HERE}/torch_graph.py"], {}, "clean"),
        ("torch_graph", "pytorch", "cudaMallocAsync", [PY, f"{HERE}/torch_graph.py"], ASYNC, "clean"),
        ("torch_compile", "pytorch", "native", [PY, f"{HERE}/torch_compile_app.py"], {}, "clean"),
        # A CUDA tensor sent to a spawned process through a queue (CUDA IPC): clean as PyTorch
        # does it; racy when the producer writes it again on a side stream after sending.
        ("torch_ipc clean", "pytorch", "native", [PY, f"{HERE}/torch_ipc.py", "clean"], {}, "clean"),
        ("torch_ipc producer_writes_again", "pytorch", "native", [PY, f"{HERE}/torch_ipc.py", "producer_writes_again"], {}, "cross-stream-race"),
        ("cupy_app clean", "cupy", "default pool", c("default", "clean"), {}, "clean"),
        ("cupy_app missing_wait_event", "cupy", "default pool", c("default", "missing_wait_event"), {}, "cross-stream-race"),
        ("cupy_app free_without_wait", "cupy", "default pool", c("default", "free_without_wait"), {}, "cross-stream-race"),
        ("cupy_app clean", "cupy", "MemoryAsyncPool", c("async", "clean"), {}, "clean"),
        # s2 never waits for s1: b, allocated and written on s1, is read on s2; and since the
        # closing s2.synchronize() then joins nothing of s1, CuPy's free of `a` at exit (on the
        # legacy stream) meets s1's last read of it.
        ("cupy_app missing_wait_event", "cupy", "MemoryAsyncPool", c("async", "missing_wait_event"), {}, "use-before-alloc,cross-stream-race,free-race"),
        ("cupy_app free_without_wait", "cupy", "MemoryAsyncPool", c("async", "free_without_wait"), {}, "free-race"),
        ("numba_app clean", "numba-cuda", "cuMemAlloc", [PY, f"{HERE}/numba_app.py", "clean"], {}, "clean"),
        ("numba_app missing_wait", "numba-cuda", "cuMemAlloc", [PY, f"{HERE}/numba_app.py", "missing_wait"], {}, "cross-stream-race"),
        ("cuda_core_app clean", "cuda.core", "stream-ordered", [PY, f"{HERE}/cuda_core_app.py", "clean"], {}, "clean"),
        ("cuda_core_app free_without_wait", "cuda.core", "stream-ordered", [PY, f"{HERE}/cuda_core_app.py", "free_without_wait"], {}, "free-race"),
        ("cuda_core_app use_before_alloc", "cuda.core", "stream-ordered", [PY, f"{HERE}/cuda_core_app.py", "use_before_alloc"], {}, "use-before-alloc"),
        ("jax_train", "jax", "BFC over cuMemMap", [PY, f"{HERE}/jax_train.py"], {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, "clean"),
        ("cudarc_app", "cudarc", "stream-ordered", [cudarc_app, "20"], {}, "clean"),
        # No stream ordered at all: x and y allocated, copied and zeroed on the producer, used on
        # the consumer, copied back and freed on the producer.
        ("cudarc_app --racy", "cudarc", "stream-ordered", [cudarc_app, "20", "--racy"], {}, "use-before-alloc,cross-stream-race,free-race"),
        ("warp_app clean", "warp", "mempool", [PY, f"{HERE}/warp_app.py", "clean"], {}, "clean"),
        ("warp_app array_on_another_stream", "warp", "mempool", [PY, f"{HERE}/warp_app.py", "array_on_another_stream"], {}, "use-before-alloc,cross-stream-race"),
        ("warp_app copy_without_wait", "warp", "mempool", [PY, f"{HERE}/warp_app.py", "copy_without_wait"], {}, "use-before-alloc"),
        ("nvmath_app clean", "nvmath-python", "CuPy MemoryAsyncPool", [PY, f"{HERE}/nvmath_app.py", "clean"], {}, "clean"),
        ("nvmath_app stream_ordered_deallocation", "nvmath-python", "CuPy MemoryAsyncPool", [PY, f"{HERE}/nvmath_app.py", "stream_ordered_deallocation"], {}, "free-race"),
    ] + ddp_cases(min(gpu_count(), 2)) + (warp_multi_gpu_cases() + torch_ipc_peer_cases() if gpu_count() >= 2 else [])


def ddp_cases(ranks):
    """DDP and all_reduce over NCCL, one rank per GPU: two when there are two, else one (NCCL
    with one rank still runs each collective on its stream, so the same races exist)."""
    if ranks == 0:
        return []
    # A port of this runner's own: two runners side by side on torchrun's default 29500 fail
    # each other's programs.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ddp = lambda mode: [
        PY, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}", f"--master_port={port}",
        f"{HERE}/torch_ddp.py", mode,
    ]
    # A rank's exit status 66 would make the launcher fail the job: the ranks keep theirs.
    ranks_keep_status = {"STREAMSAN_OPTIONS": "exitcode=0"}
    name = f"torch_ddp ({ranks} rank{'s' if ranks > 1 else ''})"
    return [
        (f"{name} clean", "pytorch", "native", ddp("clean"), ranks_keep_status, "clean"),
        (f"{name} read_before_wait", "pytorch", "native", ddp("read_before_wait"), ranks_keep_status, "cross-stream-race"),
        (f"{name} side_stream_read_before_wait", "pytorch", "native", ddp("side_stream_read_before_wait"), ranks_keep_status, "cross-stream-race"),
        (f"{name} side_stream_read_after_wait", "pytorch", "native", ddp("side_stream_read_after_wait"), ranks_keep_status, "clean"),
    ]


def warp_multi_gpu_cases():
    w = lambda mode: [PY, f"{HERE}/warp_multi_gpu.py", mode]
    return [
        ("warp_multi_gpu clean", "warp", "mempool", w("clean"), {}, "clean"),
        ("warp_multi_gpu peer_copy_without_wait", "warp", "mempool", w("peer_copy_without_wait"), {}, "use-before-alloc"),
        ("warp_multi_gpu copy_without_source_sync", "warp", "mempool", w("copy_without_source_sync"), {}, "use-before-alloc,cross-stream-race"),
    ]


def torch_ipc_peer_cases():
    """torch_ipc.py with the consumer reading the tensor from the second GPU (a peer copy)."""
    i = lambda mode: [PY, f"{HERE}/torch_ipc.py", mode, "peer"]
    return [
        ("torch_ipc clean peer", "pytorch", "native", i("clean"), {}, "clean"),
        ("torch_ipc producer_writes_again peer", "pytorch", "native", i("producer_writes_again"), {}, "cross-stream-race"),
    ]


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def run(cmd, env, log):
    start = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = "timeout", e.stdout or "", e.stderr or ""
        out, err = (out.decode() if isinstance(out, bytes) else out), (err.decode() if isinstance(err, bytes) else err)
    elapsed = time.time() - start
    log.write(f"$ {' '.join(cmd)}\n# exit {code}, {elapsed:.2f} s\n{out}{err}\n")
    return code, out, err, elapsed


def result_line(stdout):
    lines = stdout.strip().splitlines()
    return lines[-1] if lines else ""


def own_files(cmd):
    """The program's own source: the script, or the Rust program's main.rs."""
    return [os.path.basename(c) for c in cmd if c.endswith(".py")] or ["cudarc-app/src/main.rs"]


# Frameworks whose wheels the GPU machine lacks, by the module that tells they are installed.
CARRIED = {"warp": "warp", "nvmath-python": "nvmath"}


def main():
    streamsan, cudarc_app, out = sys.argv[1:4]
    words = sys.argv[4:]
    log = open(os.path.join(out, "real-apps.log"), "w")
    # The reports in a folder of this run's own: two runs side by side (tests/gpu/all.sh
    # with WORK=) must not read or clear each other's.
    reports = tempfile.mkdtemp(prefix="real-apps.")
    results, missing = [], []
    for index, (program, framework, allocator, cmd, extra, expected) in enumerate(cases(cudarc_app)):
        if words and not any(w in program or w in framework for w in words):
            continue
        # The wheels that travel apart (tests/gpu/wheels.sh): a run that carried none skips
        # their programs.
        module = CARRIED.get(framework)
        if module and subprocess.run([PY, "-c", f"import {module}"], capture_output=True).returncode != 0:
            print(f"skip {framework} {program}: {module} not installed", flush=True)
            missing.append((framework, allocator, program, expected, module))
            continue
        env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
        # A case's own options go after the caller's (STREAMSAN_OPTIONS=host_races=1 sh
        # tests/gpu/all.sh runs every case with the guard on), not instead of them.
        if "STREAMSAN_OPTIONS" in extra and os.environ.get("STREAMSAN_OPTIONS"):
            env["STREAMSAN_OPTIONS"] = f"{os.environ['STREAMSAN_OPTIONS']}:{extra['STREAMSAN_OPTIONS']}"
        native_code, native_out, native_err, native_s = run(cmd, env, log)
        report_dir = f"{reports}/{index}"
        os.makedirs(report_dir)
        code, stdout, stderr, streamsan_s = run([streamsan, "run", "--report", f"{report_dir}/report.%p.json", "--"] + cmd, env, log)
        races, notes = [], []
        for f in sorted(os.listdir(report_dir)):
            with open(os.path.join(report_dir, f)) as fh:
                report = json.load(fh)
            races += report["races"]
            notes += report["notes"]
        kinds = sorted({r["kind"] for r in races})
        files = own_files(cmd)
        in_program = any(any(fr.get("file", "").endswith(f) for f in files for fr in r[side]["site"])
                         for r in races for side in ("first", "second"))
        failures = []
        if native_code != 0:
            failures.append(f"fails natively ({native_code}): {native_err.strip()[-300:]}")
        # streamsan's exit status for a run with races is 66 (ThreadSanitizer's), unless the
        # program failed on its own or the case chose another (exitcode=...).
        chosen = "exitcode=" in extra.get("STREAMSAN_OPTIONS", "")
        expected_code = 66 if races and native_code == 0 and not chosen else native_code
        if code != expected_code:
            failures.append(f"exit {native_code} natively, {code} under streamsan (expected {expected_code})")
        same_output = result_line(stdout) == result_line(native_out)
        if not same_output:
            failures.append(f"output differs: {result_line(native_out)!r} natively, {result_line(stdout)!r} under streamsan")
        expected_kinds = [] if expected == "clean" else sorted(expected.split(","))
        if kinds != expected_kinds:
            failures.append(f"expected {expected_kinds or 'clean'}, reported {kinds or 'nothing'}")
        if expected != "clean" and not in_program:
            failures.append("no call site in the program's own code")
        summary = [{"kind": r["kind"], "hazard": r.get("hazard"), "count": r["count"],
                    "first": r["first"].get("kernel") or r["first"]["api"],
                    "second": r["second"].get("kernel") or r["second"]["api"],
                    "missing_wait": r["missing_wait"]["text"]} for r in races]
        results.append({
            "program": program, "framework": framework, "allocator": allocator, "expected": expected,
            "reported_kinds": kinds, "races": len(races), "native_s": round(native_s, 2),
            "streamsan_s": round(streamsan_s, 2), "same_output": same_output,
            "native_exit": native_code, "streamsan_exit": code, "call_site_in_program": in_program,
            "notes": sorted({n["kind"] for n in notes}), "race_summaries": summary[:10],
            "ok": not failures, "failures": failures,
        })
        print(f"{'ok  ' if not failures else 'FAIL'} {framework:13} {allocator:20} {program}: reported {kinds} "
              f"({native_s:.1f} s / {streamsan_s:.1f} s) {failures}", flush=True)
        for s in summary[:3] if (races and expected == "clean") else []:
            print(f"      {s['kind']} {s['hazard'] or ''} x{s['count']}: {s['first']} -> {s['second']}", flush=True)
    provenance = subprocess.run(["sh", os.path.join(HERE, "..", "provenance.sh")], capture_output=True, text=True).stdout
    with open(os.path.join(out, "real-apps.json"), "w") as f:
        json.dump({"provenance": provenance, "programs": results}, f, indent=1)
    result = Result("apps")
    for r in results:
        result.case(f"{r['framework']} / {r['allocator']} / {r['program']}", r["expected"],
                    kinds_text(r["reported_kinds"], r["expected"]), ok=r["ok"],
                    figures={"native_s": r["native_s"], "streamsan_s": r["streamsan_s"]},
                    note="; ".join(r["failures"]) or None)
    for framework, allocator, program, expected, module in missing:
        result.case(f"{framework} / {allocator} / {program}", expected, f"not run: {module} not installed", outcome="skip")
    status = result.write(out, provenance)
    print(f"{sum(r['ok'] for r in results)} of {len(results)} programs as expected")
    return status


if __name__ == "__main__":
    sys.exit(main())
