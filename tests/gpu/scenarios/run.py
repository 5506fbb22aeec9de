#!/usr/bin/env python3
"""The scenario suite on a GPU machine, under streamsan.

Four suites: the driver-API programs of tests/scenarios/semantics/ (the same ones the
stand-in tests run), the CUDA C++ runtime-API programs of runtime_scenarios.cu, built
plain and with --default-stream per-thread, and ipc_scenarios.cu's pairs of processes sharing
memory and events through CUDA IPC (each case's reports are every process's). Where run.sh built them (two GPUs and an NCCL
found), two more: the NCCL programs of tests/scenarios/nccl.c, linked with NCCL and opening it
with dlopen. Every scenario runs as its racy and its fixed
twin, natively and under `streamsan run`. A case passes when the racy twin is reported with
exactly the kinds the program's own table lists for it (comma-separated; nothing more, nothing
less), the fixed twin is clean, and output and exit status are those of the native run. One
exception, stated where it is made: in the per-thread build, `default_stream_from_two_threads`
has no fixed twin (each thread's default stream is its own), so both twins must race.

The driver-API and NCCL programs' kernels are the stand-in's PTX, whose bodies touch nothing
on a GPU: what they would touch is their parameters' business, so those suites run with
`--footprint params` (their subject is the ordering rules; what kernels touch, measured, is
the footprint suite's). The runtime suites' kernels are real and run at the default.

Writes result-scenarios.json (tests/gpu/result.py), scenarios.json ({"provenance": the build
and machine, "cases": a list of {"case", "expected", "reported_kinds", "races", ...}}) and
scenarios.log (every command's output, streamsan's warnings included); the reports go into
BUILD_DIR/reports/.
Usage: run.py STREAMSAN BUILD_DIR OUT_DIR
       run.py --module-reload STREAMSAN BUILD_DIR OUT_DIR   (module_reload, built by run.sh:
       the race must name both kernels, whether or not this driver reuses the handle; added
       to the result)
SCENARIO_SUITES (comma-separated suite names, e.g. nccl-dlopen) runs only those suites.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from result import Result, add_case, kinds_text, result_path  # noqa: E402


def run(cmd, log, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    log.write(f"$ {' '.join(cmd)}\n# exit {proc.returncode}\n{proc.stdout}{proc.stderr}\n")
    return proc


def main():
    streamsan, build, out = sys.argv[1:4]
    params = ["--footprint", "params"]
    suites = [
        ("driver-api", f"{build}/semantics", params),
        ("runtime", f"{build}/runtime_scenarios", []),
        ("runtime-per-thread", f"{build}/runtime_scenarios_ptds", []),
        ("ipc", f"{build}/ipc_scenarios", []),
    ] + [(suite, exe, params) for suite, exe in (("nccl", f"{build}/nccl"), ("nccl-dlopen", f"{build}/nccl_dlopen"))
         if os.path.exists(exe)]
    only = os.environ.get("SCENARIO_SUITES")
    if only:
        suites = [s for s in suites if s[0] in only.split(",")]
    log = open(os.path.join(out, "scenarios.log"), "w")
    results = []
    for suite, exe, options in suites:
        listing = run([exe, "list"], log).stdout.split("\n")
        for line in filter(None, listing):
            name, racy_reports = line.split()
            for twin in ("racy", "fixed"):
                expected = racy_reports if twin == "racy" else "clean"
                if suite == "runtime-per-thread" and name == "default_stream_from_two_threads":
                    # The default stream is each thread's own in this build: the "fixed" twin's
                    # two threads still use two streams with nothing between them, so it races.
                    expected = "cross-stream-race"
                expected_kinds = set() if expected == "clean" else set(expected.split(","))
                native = run([exe, name, twin], log)
                report_dir = f"{build}/reports/{suite}/{name}-{twin}"
                os.makedirs(report_dir, exist_ok=True)
                for f in os.listdir(report_dir):
                    os.remove(os.path.join(report_dir, f))
                under = run([streamsan, "run", *options, "--report", f"{report_dir}/report.%p.json", "--", exe, name, twin], log)
                kinds, races, notes = set(), 0, set()
                for f in sorted(os.listdir(report_dir)):
                    with open(os.path.join(report_dir, f)) as fh:
                        report = json.load(fh)
                    races += len(report["races"])
                    kinds.update(r["kind"] for r in report["races"])
                    notes.update(n["kind"] for n in report["notes"])
                failures = []
                if kinds != expected_kinds:
                    failures.append(f"expected {sorted(expected_kinds) or 'clean'}, reported {sorted(kinds) or 'nothing'}")
                # A run with races exits 66 (ThreadSanitizer's status), unless the program failed.
                expected_code = 66 if races and native.returncode == 0 else native.returncode
                if under.returncode != expected_code:
                    failures.append(f"exit {native.returncode} natively, {under.returncode} under streamsan (expected {expected_code})")
                if native.returncode != 0:
                    failures.append(f"failed natively: {native.stderr.strip()[:200]}")
                if native.stdout != under.stdout:
                    failures.append("output differs")
                case = f"{suite}/{name}/{twin}"
                results.append({"case": case, "expected": expected, "reported_kinds": sorted(kinds),
                                "races": races, "notes": sorted(notes), "native_exit": native.returncode,
                                "streamsan_exit": under.returncode, "same_output": native.stdout == under.stdout,
                                "ok": not failures, "failures": failures})
                print(f"{'ok  ' if not failures else 'FAIL'} {case}: expected {expected}, reported {sorted(kinds)} {failures}", flush=True)
    provenance = subprocess.run(["sh", os.path.join(os.path.dirname(__file__), "..", "provenance.sh")],
                                capture_output=True, text=True).stdout
    with open(os.path.join(out, "scenarios.json"), "w") as f:
        json.dump({"provenance": provenance, "cases": results}, f, indent=1)
    result = Result("scenarios")
    for r in results:
        result.case(r["case"], r["expected"], kinds_text(r["reported_kinds"], r["expected"]), ok=r["ok"],
                    note="; ".join(r["failures"]) or None)
    result.write(out, provenance)
    passed = sum(r["ok"] for r in results)
    print(f"{passed} of {len(results)} cases passed")
    return 0 if passed == len(results) else 1


# module_reload's one race, as tests/kernels.rs has it on the stand-in: second's write of x
# meets first's read, each kernel under its own name although the driver may hand first's
# handle to second.
MODULE_RELOAD_RACE = ("cross-stream-race", "WAR", "first(float const*)", "second(float*, float*)")


def module_reload(streamsan, build, out):
    exe = f"{build}/module_reload"
    native = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    print(f"module_reload natively: {native.stdout.strip()}", flush=True)
    report = f"{build}/module_reload.json"
    subprocess.run([streamsan, "run", "--footprint", "params", "--report", report, "--", exe], timeout=120)
    with open(report) as f:
        races = [(x["kind"], x.get("hazard"), x["first"].get("kernel"), x["second"].get("kernel"))
                 for x in json.load(f)["races"]]
    print("module_reload races:", races, flush=True)
    show = lambda pairs: "; ".join(f"{k} {h} {a} -> {b}" for k, h, a, b in pairs) or "clean"  # noqa: E731
    return add_case(result_path(out, "scenarios"), "module_reload", show([MODULE_RELOAD_RACE]), show(races), races == [MODULE_RELOAD_RACE],
                    note=f"natively: {native.stdout.strip()}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--module-reload"]:
        sys.exit(module_reload(*sys.argv[2:5]))
    sys.exit(main())
