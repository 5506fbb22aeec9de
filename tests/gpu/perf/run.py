#!/usr/bin/env python3
"""Overhead on the GPU: the programs of programs.py natively, under streamsan (and any other
builds or options of it), under compute-sanitizer memcheck with stream-ordered race tracking,
and with PyTorch's CUDA sanitizer (TORCH_CUDA_SANITIZER=1), in one run side by side.

Every mode does the same work: the same program, the same number of warm-up and timed steps
in each process. Native and the streamsan modes alternate, ROUNDS processes each, so that a
machine's slow minute falls on all of them; memcheck and CSAN, much slower, run SLOW_ROUNDS
processes each (fewer processes, the same work in each). A process's figure is the median of
its timed steps; a mode's figure is the median over its processes, quoted with the spread
(lowest and highest process). For the alternating modes each round also gives a pair ratio
(mode / native of the same round): its median and spread are quoted too.

Usage: run.py STREAMSAN OUT_DIR [PROGRAM...]     (default: every program of programs.py)
Environment: PERF_ROUNDS (5), PERF_SLOW_ROUNDS (1), PERF_STEPS (20), PERF_WARMUP (5),
PERF_SLOW ("memcheck,csan": which slow tools run; "" for none), PERF_SLOW_TIMEOUT (580: seconds
a slow tool's process may run; one that runs longer is recorded as "timeout"), PERF_VARIANTS (more streamsan
modes, "name=COMMAND ARGS;name2=...", each COMMAND a streamsan binary with its run options,
e.g. "before=.device/before/streamsan;learn=.device/streamsan --footprint learn"),
STREAMSAN_PERF_CPUS (a taskset list that pins every process).
Writes overhead.json and overhead.log in OUT_DIR.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM_NAMES = ["gpt2", "resnet18_prefetch", "compiled_mlp", "maskrcnn", "gcn", "ddp", "launch_bound", "compute_bound"]


def run(cmd, env, log, timeout=580):
    start = time.time()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code = "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.time() - start
    log.write(f"$ {' '.join(cmd)}\n# exit {code}, {wall:.2f} s\n{out}{err[-3000:]}\n")
    log.flush()
    result = None
    for line in out.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
    return result, wall, code


def spread(values):
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)} if values else None


def main():
    streamsan, out = sys.argv[1], sys.argv[2]
    programs = sys.argv[3:] or PROGRAM_NAMES
    rounds = int(os.environ.get("PERF_ROUNDS", "5"))
    slow_rounds = int(os.environ.get("PERF_SLOW_ROUNDS", "1"))
    steps, warmup = os.environ.get("PERF_STEPS", "20"), os.environ.get("PERF_WARMUP", "5")
    slow = [m for m in os.environ.get("PERF_SLOW", "memcheck,csan").split(",") if m]
    slow_timeout = int(os.environ.get("PERF_SLOW_TIMEOUT", "580"))
    streamsan_modes = {"streamsan": [streamsan, "run"]}
    for variant in filter(None, os.environ.get("PERF_VARIANTS", "").split(";")):
        name, command = variant.split("=", 1)
        words = command.split()
        streamsan_modes[name] = [words[0], "run"] + words[1:]
    os.makedirs("/tmp/perf-reports", exist_ok=True)
    log = open(os.path.join(out, "overhead.log"), "w")
    provenance = subprocess.run(["sh", os.path.join(HERE, "..", "provenance.sh")], capture_output=True, text=True).stdout
    log.write(provenance)
    results = []
    for program in programs:
        script = [sys.executable, os.path.join(HERE, "programs.py"), program, steps, warmup]
        modes = {"native": (script, {})}
        for name, prefix in streamsan_modes.items():
            modes[name] = (prefix + ["--report", f"/tmp/perf-reports/{program}-{name}.%p.json", "--"] + script, {})
        modes["memcheck"] = (["compute-sanitizer", "--tool", "memcheck", "--track-stream-ordered-races", "all"] + script, {})
        modes["csan"] = (script, {"TORCH_CUDA_SANITIZER": "1"})
        pin = os.environ.get("STREAMSAN_PERF_CPUS")
        if pin:
            modes = {mode: (["taskset", "-c", pin] + cmd, extra) for mode, (cmd, extra) in modes.items()}
        order = (["native"] + list(streamsan_modes)) * rounds + [m for m in slow for _ in range(slow_rounds)]
        row = {"program": program, "modes": {}}
        for mode in order:
            cmd, extra = modes[mode]
            result, wall, code = run(cmd, dict(os.environ, **extra), log, slow_timeout if mode in slow else 580)
            m = row["modes"].setdefault(mode, {"process_medians_ms": [], "process_s": [], "exits": [], "checksums": []})
            m["process_medians_ms"].append(result and result["median_step_ms"])
            m["process_s"].append(round(wall, 2))
            m["exits"].append(code)
            m["checksums"].append(result and result["checksum"])
            print(f"{program:18} {mode:10} step {result and result['median_step_ms']} ms, process {wall:.1f} s, exit {code}", flush=True)
        native = [t for t in row["modes"]["native"]["process_medians_ms"] if t is not None]
        for mode, m in row["modes"].items():
            times = [t for t in m["process_medians_ms"] if t is not None]
            m["step_ms"] = spread(times)
            if mode != "native" and times and native:
                m["ratio"] = round(statistics.median(times) / statistics.median(native), 3)
                if mode in streamsan_modes:
                    pairs = [t / n for t, n in zip(m["process_medians_ms"], row["modes"]["native"]["process_medians_ms"]) if t and n]
                    m["pair_ratios"] = spread(pairs)
        results.append(row)
        with open(os.path.join(out, "overhead.json"), "w") as f:
            json.dump({"provenance": provenance, "steps": int(steps), "warmup": int(warmup), "rounds": rounds,
                       "slow_rounds": slow_rounds, "programs": results}, f, indent=1)
    print(provenance)
    for row in results:
        native = row["modes"]["native"]["step_ms"]
        cells = [f"native {native and native['median']} ms"]
        for mode, m in row["modes"].items():
            if "ratio" in m:
                pr = m.get("pair_ratios")
                cells.append(f"{mode} {m['ratio']}x" + (f" (pairs {pr['min']}-{pr['max']})" if pr else ""))
        print(f"{row['program']:18} " + ", ".join(cells))


if __name__ == "__main__":
    main()
