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

The GPU machine's cores run at one of two speeds about 1.9x apart, switching within and
between processes (docs/performance.md), which moves a CPU-bound step by as much. So each
step comes with two probes of the core's speed (programs.py's probe(), before and after it),
and every figure is also given over the steps taken at full speed: both probes within
FULL_SPEED of the fastest probe of the program's run, in processes that had at least
MIN_FULL_SPEED_STEPS such steps; and, since on some days few processes have that many, the
median of every full-speed step of a mode's processes pooled, with how many steps it pools.

Usage: run.py STREAMSAN OUT_DIR [PROGRAM...]     (default: every program of programs.py)
       run.py --summarize OVERHEAD.json          (the figures of a run again, from its file)
Environment: PERF_ROUNDS (5), PERF_SLOW_ROUNDS (1), PERF_STEPS (20), PERF_WARMUP (5),
PERF_SLOW ("memcheck,csan": which slow tools run; "" for none), PERF_SLOW_TIMEOUT (580: seconds
a slow tool's process may run; one that runs longer is recorded as "timeout"), PERF_VARIANTS (more streamsan
modes, "name=[VAR=VALUE...] COMMAND ARGS;name2=...", each COMMAND a streamsan binary with its
run options, run with the variables given before it, e.g. "before=.device/before/streamsan;
learn=.device/streamsan --footprint learn"; a variant named in PERF_SLOW runs SLOW_ROUNDS
processes after the rounds, as the slow tools do),
STREAMSAN_PERF_CPUS (a taskset list that pins every process).
Writes overhead.json, overhead.log and result-perf.json (tests/gpu/result.py: a case a program
with its figures) in OUT_DIR; exits 1 if a native or streamsan process did not exit 0 (the
programs are correct, so a race makes streamsan's exit 66). The slow tools' exits and figures
are recorded as they come.
"""
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result  # noqa: E402

FULL_SPEED = 1.3
MIN_FULL_SPEED_STEPS = 5
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


def full_speed_median(steps, probes, fastest):
    """The median of a process's steps taken at full speed, or None when it took fewer than
    MIN_FULL_SPEED_STEPS of them (or its output has no probes)."""
    if not steps or not probes or fastest is None:
        return None
    full = [t for t, pair in zip(steps, probes) if max(pair) <= FULL_SPEED * fastest]
    return round(statistics.median(full), 4) if len(full) >= MIN_FULL_SPEED_STEPS else None


def pooled_full_speed(process_steps, process_probes, fastest):
    """The median of every step of a mode's processes taken at full speed, and their number."""
    if fastest is None:
        return None
    full = [t for steps, probes in zip(process_steps, process_probes) if steps and probes
            for t, pair in zip(steps, probes) if max(pair) <= FULL_SPEED * fastest]
    return {"median": round(statistics.median(full), 4), "steps": len(full)} if full else None


def compare(mode, native, key):
    """A mode against native on the per-process figures under `key`: the ratio of the modes'
    medians and the spread of the per-round pair ratios."""
    times = [t for t in mode[key] if t is not None]
    base = [t for t in native[key] if t is not None]
    if not times or not base:
        return None, None
    pairs = [t / n for t, n in zip(mode[key], native[key]) if t and n]
    return round(statistics.median(times) / statistics.median(base), 3), spread(pairs)


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
    streamsan_modes = {"streamsan": ([streamsan, "run"], {})}
    for variant in filter(None, os.environ.get("PERF_VARIANTS", "").split(";")):
        name, command = variant.split("=", 1)
        words = command.split()
        env = dict(w.split("=", 1) for w in itertools.takewhile(lambda w: "=" in w, words))
        words = words[len(env):]
        streamsan_modes[name] = ([words[0], "run"] + words[1:], env)
    alternating = [mode for mode in streamsan_modes if mode not in slow]
    os.makedirs("/tmp/perf-reports", exist_ok=True)
    log = open(os.path.join(out, "overhead.log"), "w")
    provenance = subprocess.run(["sh", os.path.join(HERE, "..", "provenance.sh")], capture_output=True, text=True).stdout
    log.write(provenance)
    results, status = [], 0
    result = Result("perf")
    for program in programs:
        script = [sys.executable, os.path.join(HERE, "programs.py"), program, steps, warmup]
        modes = {"native": (script, {})}
        for name, (prefix, env) in streamsan_modes.items():
            modes[name] = (prefix + ["--report", f"/tmp/perf-reports/{program}-{name}.%p.json", "--"] + script, env)
        modes["memcheck"] = (["compute-sanitizer", "--tool", "memcheck", "--track-stream-ordered-races", "all"] + script, {})
        modes["csan"] = (script, {"TORCH_CUDA_SANITIZER": "1"})
        pin = os.environ.get("STREAMSAN_PERF_CPUS")
        if pin:
            modes = {mode: (["taskset", "-c", pin] + cmd, extra) for mode, (cmd, extra) in modes.items()}
        order = (["native"] + alternating) * rounds + [m for m in slow for _ in range(slow_rounds)]
        row = {"program": program, "modes": {}}
        for mode in order:
            cmd, extra = modes[mode]
            step, wall, code = run(cmd, dict(os.environ, **extra), log, slow_timeout if mode in slow else 580)
            m = row["modes"].setdefault(mode, {"process_medians_ms": [], "process_s": [], "exits": [], "checksums": [],
                                               "process_steps_ms": [], "process_probes_ms": []})
            m["process_medians_ms"].append(step and step["median_step_ms"])
            m["process_steps_ms"].append(step and step["step_ms"])
            m["process_probes_ms"].append(step and step.get("probe_ms"))
            m["process_s"].append(round(wall, 2))
            m["exits"].append(code)
            m["checksums"].append(step and step["checksum"])
            print(f"{program:18} {mode:10} step {step and step['median_step_ms']} ms, process {wall:.1f} s, exit {code}", flush=True)
        summarize(row, alternating)
        results.append(row)
        with open(os.path.join(out, "overhead.json"), "w") as f:
            json.dump({"provenance": provenance, "steps": int(steps), "warmup": int(warmup), "rounds": rounds,
                       "slow_rounds": slow_rounds, "programs": results}, f, indent=1)
        result_case(result, row, ["native"] + alternating)
        # Written after each program, so that a run stopped by its limit keeps what it measured.
        status = result.write(out, provenance)
    print(provenance)
    for row in results:
        print(summary_line(row))
    return status


def result_case(result, row, checked):
    """A program's case: its processes' exits, and the figures the tables show (streamsan's
    and the other modes' ratios to native, over all steps and pooled at full speed)."""
    m = row["modes"]
    pooled = lambda mode: (m[mode]["full_speed_pooled_ms"] or {}).get("steps")  # noqa: E731
    # A process's wall time holds its start and warm-up (the first launches, measured): the
    # cost a short run sees, beside the steady step.
    walls = lambda mode: spread(m[mode]["process_s"])  # noqa: E731
    figures = {"processes": len(m["native"]["exits"]), "native_step_ms": m["native"]["step_ms"],
               "native_process_s": walls("native"), "full_speed_steps": {mode: pooled(mode) for mode in checked}}
    for mode, v in m.items():
        if mode == "native":
            continue
        prefix = mode.replace("-", "_")
        if mode in checked:
            figures[f"{prefix}_step_ms"] = v["step_ms"]
            figures[f"{prefix}_x"] = v.get("ratio")
            figures[f"{prefix}_pairs_x"] = v.get("pair_ratios")
            figures[f"{prefix}_full_speed_pooled_x"] = v.get("full_speed_pooled_ratio")
            figures[f"{prefix}_process_s"] = walls(mode)
        else:
            figures[f"{prefix}_x"] = v.get("ratio") if all(e == 0 for e in v["exits"]) else ",".join(map(str, v["exits"]))
    ok = all(e == 0 for mode in checked for e in m[mode]["exits"])
    observed = "exits: " + "; ".join(f"{mode} {','.join(map(str, v['exits']))}" for mode, v in m.items())
    result.case(row["program"], f"every {' and '.join(checked)} process exits 0 (no race)", observed, ok=ok,
                figures=figures)


def summarize(row, streamsan_modes):
    """Adds to each mode of `row` its figures: over all steps, at full speed per process, and
    at full speed pooled; for a mode other than native, its ratios to native."""
    probes = [p for m in row["modes"].values() for ps in m["process_probes_ms"] if ps for pair in ps for p in pair]
    fastest = min(probes) if probes else None
    for m in row["modes"].values():
        m["full_speed_medians_ms"] = [full_speed_median(st, pr, fastest) for st, pr in zip(m["process_steps_ms"], m["process_probes_ms"])]
        m["full_speed_pooled_ms"] = pooled_full_speed(m["process_steps_ms"], m["process_probes_ms"], fastest)
    native = row["modes"]["native"]
    for mode, m in row["modes"].items():
        m["step_ms"] = spread([t for t in m["process_medians_ms"] if t is not None])
        m["full_speed_step_ms"] = spread([t for t in m["full_speed_medians_ms"] if t is not None])
        if mode != "native":
            for key, ratio, pairs in (("process_medians_ms", "ratio", "pair_ratios"),
                                      ("full_speed_medians_ms", "full_speed_ratio", "full_speed_pair_ratios")):
                m[ratio], m[pairs] = compare(m, native, key)
                if mode not in streamsan_modes:
                    del m[pairs]  # the slow tools run apart from the rounds: no pairs
            pooled, base = m["full_speed_pooled_ms"], native["full_speed_pooled_ms"]
            m["full_speed_pooled_ratio"] = round(pooled["median"] / base["median"], 3) if pooled and base else None


def summary_line(row):
    native = row["modes"]["native"]
    pooled = native.get("full_speed_pooled_ms")
    cells = [f"native {native['step_ms'] and native['step_ms']['median']} ms"
             f" ({native['full_speed_step_ms'] and native['full_speed_step_ms']['median']} at full speed"
             + (f", {pooled['median']} pooled over {pooled['steps']} steps" if pooled else "") + ")"]
    for mode, m in row["modes"].items():
        if m.get("ratio") is not None:
            pr, fs, fpr = m.get("pair_ratios"), m.get("full_speed_ratio"), m.get("full_speed_pair_ratios")
            pooled, pooled_ratio = m.get("full_speed_pooled_ms"), m.get("full_speed_pooled_ratio")
            cells.append(f"{mode} {m['ratio']}x" + (f" (pairs {pr['min']}-{pr['max']})" if pr else "")
                         + (f", at full speed {fs}x" if fs is not None else "")
                         + (f" (pairs {fpr['min']}-{fpr['max']})" if fpr else "")
                         + (f", pooled at full speed {pooled_ratio}x ({pooled['steps']} steps)" if pooled_ratio else ""))
    return f"{row['program']:18} " + ", ".join(cells)


def resummarize(path):
    """The figures of a saved run, computed again by this file's code."""
    run_file = json.load(open(path))
    for row in run_file["programs"]:
        # A run keeps pair ratios for the streamsan modes only (the slow tools run apart).
        streamsan_modes = [mode for mode, m in row["modes"].items() if "pair_ratios" in m]
        summarize(row, streamsan_modes)
        print(summary_line(row))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summarize"]:
        resummarize(sys.argv[2])
    else:
        sys.exit(main())
