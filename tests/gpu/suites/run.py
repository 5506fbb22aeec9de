#!/usr/bin/env python3
"""Other projects' own test suites, natively and under streamsan: the pass/fail counts must
be identical, each test by name ending as natively, and every race streamsan reports must be one that KNOWN_REPORTS explains (a real
race in that project's test; docs/validation.md says which): any other is a defect of
streamsan's to fix, or a race to explain there first.

Suites: numba-cuda's driver and stream tests (`python -m numba.runtests`; they need the
`filecheck` package, carried as a wheel), and Warp's stream, graph and memory-pool tests when
Warp is installed. Writes result-suites.json (tests/gpu/result.py), suites.json
({"provenance", "suites": [{"suite", "native", "streamsan", "same_counts", "races": [...]}]})
and suites.log (every command's output).
Usage: run.py STREAMSAN OUT_DIR [SUITE...]
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result  # noqa: E402

PY = sys.executable
SUITES = {
    "numba-cuda cudadrv": [PY, "-m", "numba.runtests", "-v", "numba.cuda.tests.cudadrv"],
    "numba-cuda stream API and IPC": [PY, "-m", "numba.runtests", "-v", "numba.cuda.tests.cudapy.test_stream_api",
                                      "numba.cuda.tests.cudapy.test_ipc"],
    "warp streams, graphs, mempool": [PY, "-m", "unittest", "-v", "warp.tests.cuda.test_streams",
                                      "warp.tests.cuda.test_mempool", "warp.tests.test_graph"],
}
REQUIRES = {"warp streams, graphs, mempool": "warp"}
# The reports a suite gives, each a real race in its own tests. Warp's test_event_external
# (warp/tests/cuda/test_streams.py) allocates and zeroes its arrays with wp.zeros on the
# device's stream, then launches graphs over them on two new streams that nothing orders after
# that stream: each graph kernel (inc, sum) uses an array before its allocation and beside its
# memset's write. Its external event orders each launch of the second graph (sum reads a and
# b) after the first's (inc adds to a, then b), and nothing orders the next launch of the first
# after the second: inc may write what sum still reads (WAR).
#
# numba-cuda's test_ipc fills a device array with cuMemcpyHtoD from pageable memory, which may
# return before the copy lands ("the DMA to final destination may not have completed", the
# driver API's synchronization behaviour), then hands the array's IPC handle to a child
# process that copies it out: nothing orders the child's copy after the parent's.
KNOWN_REPORTS = {
    "numba-cuda stream API and IPC": (
        "test_ipc's race",
        lambda race: race["kind"] == "cross-stream-race" and race["first"] == "cuMemcpyHtoD_v2"
        and race["second"] in ("cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2") and "IPC event" in race["missing_wait"],
    ),
    "warp streams, graphs, mempool": (
        "test_event_external's race",
        lambda race: "test_streams.py:" in race["missing_wait"] and (
            (race["kind"], race["first"]) in (("use-before-alloc", "cuMemAllocAsync"),
                                              ("cross-stream-race", "cuMemsetD8Async"))
            and race["second"].startswith(("inc_", "sum_"))
            or (race["kind"], race["hazard"]) == ("cross-stream-race", "WAR")
            and race["first"].startswith("sum_") and race["second"].startswith("inc_")),
    ),
}


def counts(output):
    """unittest's closing lines: 'Ran N tests', then 'OK (skipped=S)' or 'FAILED (failures=F, errors=E, ...)'."""
    ran = re.findall(r"^Ran (\d+) tests?", output, re.M)
    result = {"ran": int(ran[-1]) if ran else None, "failures": 0, "errors": 0, "skipped": 0, "expected_failures": 0}
    tail = re.findall(r"^(OK|FAILED)(?: \((.*)\))?$", output, re.M)
    if tail:
        result["status"] = tail[-1][0]
        for part in filter(None, (tail[-1][1] or "").split(", ")):
            key, value = part.split("=")
            result[key] = int(value)
    return result


OUTCOME = re.compile(r"(?:\.\.\. ?|^)(ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b", re.M)


def outcomes(output):
    """{test id: outcome} from unittest's -v lines, 'name (module.Class.name) ... outcome' (a
    test's own output may come between its name and its outcome)."""
    found = {}
    tests = list(re.finditer(r"^(\w+) \(([\w.]+)\)", output, re.M))
    for test, after in zip(tests, tests[1:] + [None]):
        outcome = OUTCOME.search(output, test.end(), after.start() if after else len(output))
        if outcome:
            found[test.group(2)] = outcome.group(1)
    return found


def counts_text(c):
    return f"ran {c['ran']}, {c['failures']} failures, {c['errors']} errors, {c['skipped']} skipped"


def main():
    streamsan, out = sys.argv[1], sys.argv[2]
    chosen = sys.argv[3:] or list(SUITES)
    log = open(os.path.join(out, "suites.log"), "w")
    provenance = subprocess.run(["sh", os.path.join(HERE, "..", "provenance.sh")], capture_output=True, text=True).stdout
    # The reports in a folder of this run's own, as tests/gpu/apps/run.py's.
    reports = tempfile.mkdtemp(prefix="suites.")
    results = []
    result = Result("suites")
    for name in chosen:
        need = REQUIRES.get(name)
        if need and subprocess.run([PY, "-c", f"import {need}"], capture_output=True).returncode != 0:
            print(f"skip {name}: {need} not installed", flush=True)
            result.case(name, "run", f"not run: {need} not installed", outcome="skip")
            continue
        cmd = SUITES[name]
        native = subprocess.run(cmd, capture_output=True, text=True, timeout=560)
        log.write(f"$ {' '.join(cmd)}\n# exit {native.returncode}\n{native.stdout}{native.stderr}\n")
        report_dir = f"{reports}/{re.sub('[^a-z]+', '-', name)}"
        os.makedirs(report_dir)
        under = subprocess.run([streamsan, "run", "--exitcode", "0", "--report", f"{report_dir}/report.%p.json", "--"] + cmd,
                               capture_output=True, text=True, timeout=560)
        log.write(f"$ streamsan run -- {' '.join(cmd)}\n# exit {under.returncode}\n{under.stdout}{under.stderr}\n")
        races = []
        for f in sorted(glob.glob(f"{report_dir}/*.json")):
            with open(f) as fh:
                report = json.load(fh)
            for r in report["races"]:
                races.append({"kind": r["kind"], "hazard": r.get("hazard"), "count": r["count"],
                              "first": r["first"].get("kernel") or r["first"]["api"],
                              "second": r["second"].get("kernel") or r["second"]["api"],
                              "first_site": [fr.get("function") for fr in r["first"]["site"][:4]],
                              "second_site": [fr.get("function") for fr in r["second"]["site"][:4]],
                              "missing_wait": r["missing_wait"]["text"]})
        row = {"suite": name, "command": cmd, "native": counts(native.stdout + native.stderr),
               "streamsan": counts(under.stdout + under.stderr), "native_exit": native.returncode,
               "streamsan_exit": under.returncode, "races": races}
        row["same_counts"] = row["native"] == row["streamsan"]
        # Test by test: the same tests end the same way.
        native_tests, under_tests = outcomes(native.stdout + native.stderr), outcomes(under.stdout + under.stderr)
        row["tests_otherwise"] = sorted(t for t in set(native_tests) | set(under_tests)
                                        if native_tests.get(t) != under_tests.get(t))
        known, is_known = KNOWN_REPORTS.get(name, ("no report", lambda race: False))
        unexplained = [r for r in races if not is_known(r)]
        row["unexplained_races"] = len(unexplained)
        results.append(row)
        same = row["same_counts"] and not row["tests_otherwise"] and bool(native_tests)
        print(f"{'same' if same else 'DIFFERENT'} {name}: native {row['native']}, streamsan {row['streamsan']}, "
              f"{len(native_tests)} tests by name, {len(row['tests_otherwise'])} ended otherwise, "
              f"{len(races)} race(s) reported, {len(unexplained)} not explained", flush=True)
        for r in races:
            print(f"    {r['kind']} {r['hazard'] or ''} x{r['count']}: {r['first']} -> {r['second']}", flush=True)
        observed = (("the same tests end the same way" if same else
                     f"other endings: {row['tests_otherwise'][:5] if row['tests_otherwise'] else 'counts'}")
                    + f": {counts_text(row['streamsan'])}; "
                    + (f"{len(races)} reports, {len(unexplained)} not explained" if races else "no report"))
        figure_counts = lambda c: {k: c.get(k) for k in ("ran", "failures", "errors", "skipped")}  # noqa: E731
        result.case(name, f"each test ends as natively; {known}", observed,
                    ok=same and not unexplained,
                    figures={"native": figure_counts(row["native"]), "streamsan": figure_counts(row["streamsan"]),
                             "tests": len(native_tests), "tests_otherwise": len(row["tests_otherwise"]), "reports": len(races)},
                    note="; ".join(f"{r['kind']} {r['first']} -> {r['second']}: {r['missing_wait']}" for r in unexplained[:3]) or None)
    with open(os.path.join(out, "suites.json"), "w") as f:
        json.dump({"provenance": provenance, "suites": results}, f, indent=1)
    return result.write(out, provenance)


if __name__ == "__main__":
    sys.exit(main())
