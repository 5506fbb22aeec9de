#!/usr/bin/env python3
"""Host races on a GPU machine, under streamsan.

Runs every scenario of the C++ program (host_races.cu), the stand-in's driver-API program
(tests/scenarios/host_races.c, its system-call cases among them), the PyTorch one and the CuPy one
(each lists its scenarios and what its racy twin must be reported as), both twins, natively
and under `streamsan run`. A case passes when:
- a racy twin listed `host-race` is reported as a host race whose second operation is the
  host's own access at a line of the program's own file, and whose first is a copy, memset
  or kernel launch, and nothing else is reported;
- a fixed twin, and both twins of a scenario listed `none`, are reported clean;
- the exit status is the native one (66 with races), and a fixed twin prints what it prints
  natively.
Prints expected against got per case, and logs the commit, the date, the GPU and the shim's
sha256 first.

Writes result-host-races.json (tests/gpu/result.py), host_races.json and host_races.log (every
command's output) into OUT_DIR.
Usage: run.py STREAMSAN BUILD_DIR OUT_DIR   (BUILD_DIR holds host_races built from the .cu;
the reports go into BUILD_DIR/reports/)
"""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result, kinds_text  # noqa: E402


def run(cmd, log, timeout=600):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    log.write(f"$ {' '.join(cmd)}\n# exit {proc.returncode}\n{proc.stdout}{proc.stderr}\n")
    log.flush()
    return proc


def header(streamsan):
    shim = os.path.join(os.path.dirname(streamsan), "libstreamsan_shim.so")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    date = subprocess.run(["date", "-u", "+%Y-%m-%dT%H:%M:%SZ"], capture_output=True, text=True).stdout.strip()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    digest = hashlib.sha256(open(shim, "rb").read()).hexdigest() if os.path.exists(shim) else "missing"
    return {"commit": commit, "date": date, "gpu": gpu, "shim": shim, "shim_sha256": digest}


def check(report_races, expected, program_file):
    """What is wrong with the races reported, for a case expecting `expected`."""
    kinds = sorted({r["kind"] for r in report_races})
    if expected == "clean":
        return [] if not report_races else [f"expected clean, reported {kinds}"]
    failures = []
    if kinds != ["host-race"]:
        failures.append(f"expected only host-race, reported {kinds or 'nothing'}")
    for race in (r for r in report_races if r["kind"] == "host-race"):
        second, first = race["second"], race["first"]
        if second["api"] != "host":
            failures.append(f"second operation {second['api']}, not the host")
        # The host's access is placed in the program, unless a library's worker thread made it
        # (PyTorch fills a tensor on its OpenMP threads, which run no Python): then the copy's
        # call site must be the program's.
        in_program = lambda side: any(program_file in (f.get("file") or "") for f in side["site"])
        if not in_program(second) and not in_program(first):
            failures.append(f"neither the host's access nor the copy is placed in {program_file}: "
                            f"{[(f.get('function'), f.get('file'), f.get('line')) for f in second['site'][:6]]}")
        if not first["api"].startswith(("cuMemcpy", "cuMemset", "cuLaunch")):
            failures.append(f"first operation {first['api']}, not a copy, memset or launch")
    return failures


def main():
    streamsan, build, out = sys.argv[1:4]
    log = open(os.path.join(out, "host_races.log"), "w")
    info = header(streamsan)
    for key, value in info.items():
        print(f"{key}: {value}")
        log.write(f"# {key}: {value}\n")
    programs = [
        ("cuda", [f"{build}/host_races"], "host_races.cu"),
        ("driver", [f"{build}/host_races_driver"], "host_races.c"),
        ("torch", [sys.executable, f"{HERE}/torch_host_races.py"], "torch_host_races.py"),
        ("cupy", [sys.executable, f"{HERE}/cupy_host_races.py"], "cupy_host_races.py"),
    ]
    results = []
    result = Result("host-races")
    for suite, command, program_file in programs:
        listing = run(command + ["list"], log)
        if listing.returncode != 0:
            print(f"SKIP {suite}: {listing.stderr.strip().splitlines()[-1:]}")
            results.append({"case": suite, "ok": False, "failures": ["cannot list scenarios"]})
            result.case(suite, "its scenarios listed", "cannot list scenarios", ok=False,
                        note=" ".join(listing.stderr.strip().splitlines()[-1:]))
            continue
        for line in filter(None, listing.stdout.split("\n")):
            name, racy_kind = line.split()
            if racy_kind == "crash":
                # The program's own fault, checked on the stand-in (tests/host_races.rs).
                result.case(f"{suite}/{name}", "crash", "not run on a GPU", outcome="skip",
                            note="the program's own fault, checked on the stand-in")
                continue
            for twin in ("racy", "fixed"):
                expected = racy_kind if twin == "racy" and racy_kind != "none" else "clean"
                native = run(command + [name, twin], log)
                report_dir = f"{build}/reports/{suite}/{name}-{twin}"
                os.makedirs(report_dir)
                under = run([streamsan, "run", "--host-races", "--report", f"{report_dir}/report.%p.json", "--"] + command + [name, twin], log)
                races, notes = [], set()
                for f in sorted(os.listdir(report_dir)):
                    with open(os.path.join(report_dir, f)) as fh:
                        report = json.load(fh)
                    races += report["races"]
                    notes.update(n["kind"] for n in report["notes"])
                failures = check(races, expected, program_file)
                expected_code = 66 if races and native.returncode == 0 else native.returncode
                if under.returncode != expected_code:
                    failures.append(f"exit {native.returncode} natively, {under.returncode} under streamsan (expected {expected_code})")
                if native.returncode != 0:
                    failures.append(f"failed natively: {native.stderr.strip()[-300:]}")
                if twin == "fixed" and native.stdout != under.stdout:
                    failures.append(f"output differs: {native.stdout!r} natively, {under.stdout!r} under streamsan")
                case = f"{suite}/{name}/{twin}"
                got = sorted({(r["kind"], r.get("hazard")) for r in races})
                results.append({"case": case, "expected": expected, "got": got, "notes": sorted(notes),
                                "native_exit": native.returncode, "streamsan_exit": under.returncode,
                                "ok": not failures, "failures": failures})
                hazards = sorted({h for _, h in got if h})
                result.case(case, expected, kinds_text([k for k, _ in got], expected)
                            + (f" ({', '.join(hazards)})" if hazards else ""), ok=not failures,
                            note="; ".join(failures) or None)
                print(f"{'ok  ' if not failures else 'FAIL'} {case}: expected {expected}, got {got or 'clean'}"
                      f"{' notes ' + str(sorted(notes)) if notes else ''} {failures if failures else ''}", flush=True)
    with open(os.path.join(out, "host_races.json"), "w") as f:
        json.dump({"run": info, "results": results}, f, indent=1)
    result.write(out)
    passed = sum(r["ok"] for r in results)
    print(f"{passed} of {len(results)} cases passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
