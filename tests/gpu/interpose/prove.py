#!/usr/bin/env python3
"""Interception proof on a GPU machine.

Runs each program natively and under `streamsan run`, at ROUNDS and 2*ROUNDS rounds, and
checks that (1) output and exit code are the same with and without streamsan, and (2) the
calls streamsan intercepted grow with the rounds as the program says they must: the
difference between the two runs, per kind of call, is at least ROUNDS times what one round
makes explicitly (exactly that for kernel launches). Writes interpose.json (everything),
interpose.md (a table per program of intercepted calls by function) and interpose.log.

Usage: prove.py STREAMSAN_BINARY BUILD_DIR OUT_DIR [ROUNDS]
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Kinds of call, by exported-name prefix.
KINDS = [
    ("launch", ("cuLaunchKernel", "cuLaunchCooperativeKernel")),
    ("graph_launch", ("cuGraphLaunch",)),
    ("alloc", ("cuMemAlloc", "cuMemHostAlloc", "cuMemCreate")),
    ("free", ("cuMemFree", "cuMemRelease")),
    ("copy", ("cuMemcpy",)),
    ("memset", ("cuMemset",)),
    ("event_record", ("cuEventRecord",)),
    ("wait", ("cuStreamWaitEvent",)),
]


def kind_of(name):
    for kind, prefixes in KINDS:
        if name.startswith(prefixes):
            return kind
    return None


def by_kind(calls):
    totals = {}
    for name, n in calls.items():
        kind = kind_of(name)
        if kind:
            totals[kind] = totals.get(kind, 0) + n
    return totals


def run(cmd, env, log):
    start = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.time() - start
    log.write(f"$ {' '.join(cmd)}\n# exit {proc.returncode}, {elapsed:.2f} s\n{proc.stdout}{proc.stderr}\n")
    return proc, elapsed


def merged_reports(report_dir):
    calls, unrecognised, processes, races = {}, {}, 0, []
    for name in sorted(os.listdir(report_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(report_dir, name)) as f:
            report = json.load(f)
        processes += 1
        for k, v in report.get("intercepted", {}).items():
            calls[k] = calls.get(k, 0) + v
        for k, v in report.get("unrecognised_proc_addresses", {}).items():
            unrecognised[k] = unrecognised.get(k, 0) + v
        for r in report.get("races", []):
            races.append({"kind": r["kind"], "hazard": r.get("hazard"), "count": r["count"],
                          "first": r["first"].get("kernel") or r["first"]["api"],
                          "second": r["second"].get("kernel") or r["second"]["api"],
                          "fix": r["missing_wait"]["text"]})
    return calls, unrecognised, processes, races


def main():
    streamsan, build, out = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    py = sys.executable
    programs = [
        ("nvcc runtime API, static cudart", [f"{build}/runtime_streams"], {}, None),
        ("nvcc runtime API, --default-stream per-thread", [f"{build}/runtime_streams_ptds"], {}, None),
        ("driver API linked with -lcuda", [f"{build}/road_linked"], {}, {"launch": 1}),
        ("PyTorch, two streams, native allocator", [py, f"{HERE}/torch_two_streams.py"], {}, None),
        ("PyTorch, two streams, backend:cudaMallocAsync", [py, f"{HERE}/torch_two_streams.py"],
         {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}, None),
        ("CuPy, MemoryAsyncPool", [py, f"{HERE}/cupy_async_pool.py"], {}, None),
        ("numba-cuda kernels", [py, f"{HERE}/numba_streams.py"], {}, None),
        ("cuda.core, stream-ordered memory resource", [py, f"{HERE}/cuda_core_streams.py"], {}, None),
        ("JAX jit function", [py, f"{HERE}/jax_jit.py"], {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, None),
    ]
    results = []
    log = open(os.path.join(out, "interpose.log"), "w")
    for index, (name, cmd, extra_env, fixed_expect) in enumerate(programs):
        env = dict(os.environ, PYTHONUNBUFFERED="1", **extra_env)
        result = {"program": name, "command": cmd, "env": extra_env, "rounds": [rounds, 2 * rounds], "runs": []}
        counts = []
        expect = fixed_expect
        for r in (rounds, 2 * rounds):
            native, native_s = run(cmd + [str(r)], env, log)
            report_dir = os.path.join("/tmp/interpose-reports", f"{index}-{r}")
            os.makedirs(report_dir, exist_ok=True)
            under, streamsan_s = run(
                [streamsan, "run", "--report", f"{report_dir}/report.%p.json", "--"] + cmd + [str(r)], env, log)
            calls, unrecognised, processes, races = merged_reports(report_dir)
            counts.append(calls)
            for line in native.stdout.splitlines():
                if line.startswith("EXPECT"):
                    expect = expect or json.loads(line.split(" ", 1)[1])
            result["runs"].append({
                "rounds": r, "native_exit": native.returncode, "streamsan_exit": under.returncode,
                "same_stdout": native.stdout == under.stdout, "native_s": round(native_s, 3),
                "streamsan_s": round(streamsan_s, 3), "processes_reporting": processes,
                "unrecognised_proc_addresses": unrecognised, "races": races,
            })
        failures = []
        for run_ in result["runs"]:
            if run_["native_exit"] != run_["streamsan_exit"]:
                failures.append(f"exit {run_['native_exit']} natively, {run_['streamsan_exit']} under streamsan")
            if not run_["same_stdout"]:
                failures.append(f"output differs at {run_['rounds']} rounds")
            if run_["native_exit"] != 0:
                failures.append(f"the program failed natively (exit {run_['native_exit']})")
            if run_["unrecognised_proc_addresses"]:
                failures.append(f"unrecognised cuGetProcAddress answers: {run_['unrecognised_proc_addresses']}")
        delta = {k: by_kind(counts[1]).get(k, 0) - by_kind(counts[0]).get(k, 0) for k, _ in KINDS}
        expect = expect or {}
        for kind, per_round in expect.items():
            if kind == "launch_per_round":
                launched = delta["launch"] + delta["graph_launch"]
                if launched <= 0 or launched % rounds:
                    failures.append(f"{launched} more launches for {rounds} more rounds")
                continue
            want = per_round * rounds
            got = delta.get(kind, 0)
            if (kind == "launch" and got != want) or got < want:
                failures.append(f"{kind}: {got} more calls for {rounds} more rounds, expected {'exactly ' if kind == 'launch' else 'at least '}{want}")
        result.update({"expected_per_round": expect, "delta": delta, "intercepted": counts[1],
                       "ok": not failures, "failures": failures})
        results.append(result)
        reported = result["runs"][-1]["races"]
        print(f"{'ok  ' if not failures else 'FAIL'} {name}: delta {delta} {failures}; races reported: {len(reported)}", flush=True)
        for r in reported[:5]:
            print(f"      {r['kind']} {r['hazard'] or ''} x{r['count']}: {r['first']} -> {r['second']}", flush=True)
    with open(os.path.join(out, "interpose.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(out, "interpose.md"), "w") as f:
        for r in results:
            f.write(f"### {r['program']} — {'ok' if r['ok'] else 'FAILED: ' + '; '.join(r['failures'])}\n\n")
            f.write(f"`{' '.join(os.path.basename(c) for c in r['command'])}` {r['env'] or ''}; "
                    f"{r['rounds'][1]} rounds minus {r['rounds'][0]} rounds, per kind: {r['delta']} "
                    f"(expected per round: {r['expected_per_round']})\n\n")
            f.write(f"| function | calls at {r['rounds'][1]} rounds |\n| --- | ---: |\n")
            for fn, n in sorted(r["intercepted"].items()):
                f.write(f"| {fn} | {n} |\n")
            f.write("\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
