#!/usr/bin/env python3
"""Other projects' own test suites under `pytest --streamsan` (the plugin of the Python wheel),
each also run natively by pytest: every test must end as it does natively, except the tests
whose races streamsan reports, which must fail with those races (the race text naming the
test) and be ones KNOWN_RACY explains; every race in the reports must name a test that failed
with it. The `-xdist` suites do the same under pytest-xdist with two workers.

Suites: numba-cuda's stream and event tests; Warp's stream tests (when Warp is installed),
whose test_event_external races (tests/gpu/suites/run.py says how); this repository's own
PyTorch tests (torch_streams_test.py: one racy, one fixed, one without GPU work). Writes
result-pytest.json (tests/gpu/result.py), pytest.json (each suite's outcomes) and pytest.log
(every command's output).
Usage: run.py OUT_DIR [SUITE...]      (PYTEST_RUN_SECONDS: the runner's limit, 540)
"""
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from result import Result  # noqa: E402

PY = sys.executable
# Each project's test files: its tests package, and the files in it (the ones found run; a
# version may move or drop one).
MODULES = {
    "numba": ("numba.cuda.tests", ["cudadrv/test_events.py", "cudadrv/test_streams.py", "cudapy/test_stream_api.py",
                                   "cudapy/test_events.py", "cudapy/test_async_kernel.py"]),
    "warp": ("warp.tests", ["cuda/test_streams.py"]),
    # This repository's own PyTorch tests, beside this runner (None: paths from here).
    "torch": (None, ["torch_streams_test.py"]),
}
# What a project's own conftest.py, at its repository's root and not in its wheel, gives its
# tests: a plugin of this folder's.
PLUGINS = {"numba": ["-p", "numba_cuda_fixtures"]}
SUITES = {"numba": ("numba", []), "warp": ("warp", []), "torch": ("torch", []),
          "numba-xdist": ("numba", ["-n", "2"]), "warp-xdist": ("warp", ["-n", "2"]), "torch-xdist": ("torch", ["-n", "2"])}
REQUIRES = {"numba": "numba_cuda", "warp": "warp", "torch": "torch"}
# The tests whose races are real races (docs/validation.md), written before any run.
KNOWN_RACY = {"warp": ("test_event_external", lambda name: "test_event_external" in name),
              "torch": ("test_side_stream_result_read_without_a_wait",
                        lambda name: name.endswith("test_side_stream_result_read_without_a_wait"))}
TIMEOUT = 280
# The runner's own limit (PYTEST_RUN_SECONDS): a suite is not started past it, and a pytest
# process is stopped at it, so that the result is written within the device tool's call.
DEADLINE = time.monotonic() + float(os.environ.get("PYTEST_RUN_SECONDS", "540"))


def outcomes(junit):
    """{test name (Class::function): "passed" | "failed" | "error" | "skipped"} and each failure's text."""
    found, texts = {}, {}
    if not os.path.exists(junit):
        return found, texts
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                texts[name] = (element.get("message") or "") + "\n" + (element.text or "")
                break
        # A test that failed and errored at teardown is listed twice: its worst ending counts.
        if found.get(name) not in ("failed", "error"):
            found[name] = outcome
    return found, texts


def files(package, names):
    """The test files of `names` found in `package`'s folder (pytest is given files:
    `numba.cuda` may be a package that numba-cuda installs under another name)."""
    if package is None:
        return [p for p in (os.path.join(HERE, n) for n in names) if os.path.isfile(p)]
    found = subprocess.run([PY, "-c", "import importlib.util, os, sys\n"
                            "print(os.path.dirname(importlib.util.find_spec(sys.argv[1]).origin))", package],
                           capture_output=True, text=True)
    folder = found.stdout.strip()
    return [p for p in (os.path.join(folder, n) for n in names) if found.returncode == 0 and os.path.isfile(p)]


def pytest(args, junit, log):
    # numba-cuda's tests lie in numba_cuda/numba/cuda/tests, numba_cuda/numba a namespace
    # package: pytest takes numba_cuda/numba as the package root and imports the tests'
    # package as `cuda`, which hides the CUDA bindings (`cuda.bindings`) numba-cuda needs.
    # Counting namespace packages makes the root site-packages, and the name numba_cuda....
    cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", "--import-mode=importlib", "-o",
           "consider_namespace_packages=true", "-q", f"--junitxml={junit}", *args]
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")])))
        done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=max(1, min(TIMEOUT, DEADLINE - time.monotonic())))
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        status, output = "timeout", f"{e.stdout or ''}{e.stderr or ''}"
    log.write(f"$ {' '.join(cmd)}\n# exit {status}\n{output}\n")
    log.flush()
    return status, output


def provenance():
    """provenance.sh's lines, then the wheel's build (.pywheel/BUILD) and the sha256 of the shim it
    installed, which stand for .device's."""
    text = subprocess.run(["sh", os.path.join(HERE, "..", "provenance.sh")], capture_output=True, text=True).stdout
    if os.path.exists(".pywheel/BUILD"):
        text += "".join(f"build: {line}" for line in open(".pywheel/BUILD"))
    shim = subprocess.run([PY, "-c", "import streamsan; print(streamsan.shim_path())"], capture_output=True, text=True)
    path = shim.stdout.strip()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            text += f"shim sha256 (as run): {hashlib.sha256(f.read()).hexdigest()}\n"
    return text


def main():
    out = sys.argv[1]
    chosen = sys.argv[2:] or list(SUITES)
    log = open(os.path.join(out, "pytest.log"), "w")
    work = tempfile.mkdtemp(prefix="pytest.")
    result = Result("pytest")
    rows = []
    native_of = {}
    for suite in chosen:
        if suite not in SUITES:
            result.case(suite, "run", f"not run: no suite {suite} (one of {', '.join(SUITES)})", ok=False)
            continue
        if time.monotonic() > DEADLINE - 60:
            result.case(suite, "run", "not run: out of time (PYTEST_RUN_SECONDS)", outcome="skip")
            continue
        project, extra = SUITES[suite]
        need = REQUIRES[project]
        if subprocess.run([PY, "-c", f"import {need}"], capture_output=True).returncode != 0:
            print(f"skip {suite}: {need} not installed", flush=True)
            result.case(suite, "run", f"not run: {need} not installed", outcome="skip")
            continue
        if extra and subprocess.run([PY, "-c", "import xdist"], capture_output=True).returncode != 0:
            result.case(suite, "run", "not run: pytest-xdist not installed", outcome="skip")
            continue
        tests = files(*MODULES[project])
        if not tests:
            result.case(suite, "run", f"not run: cannot find {MODULES[project]}", ok=False)
            continue
        tests = PLUGINS.get(project, []) + tests
        folder = os.path.join(work, suite)
        os.makedirs(folder)
        if project not in native_of:
            native_of[project] = pytest(tests, os.path.join(work, f"{project}-native.xml"), log)
        native, _ = outcomes(os.path.join(work, f"{project}-native.xml"))
        status, _ = pytest(["--streamsan", "--streamsan-args", f"--report {folder}/streamsan.%p.json", *extra, *tests],
                           os.path.join(folder, "junit.xml"), log)
        under, texts = outcomes(os.path.join(folder, "junit.xml"))
        raced = {name for name, text in texts.items() if "WARNING: streamsan: " in text}
        changed = {name for name in set(native) | set(under) if native.get(name) != under.get(name)}
        # Races in the reports, by the test each names.
        named = []
        for path in sorted(glob.glob(os.path.join(folder, "streamsan.*.json"))):
            with open(path) as f:
                named += [(race["kind"], race["second"].get("test")) for race in json.load(f)["races"]]
        label, known = KNOWN_RACY.get(project, ("no race", lambda name: False))
        problems = []
        if not any(outcome == "passed" for outcome in native.values()):
            problems.append("no test passed natively: the suite did not run (pytest.log says why)")
        if not under:
            problems.append(f"no test ran under --streamsan (exit {status})")
        if changed - raced:
            problems.append(f"ended otherwise than natively without a race: {sorted(changed - raced)[:5]}")
        if {n for n in raced if not known(n)}:
            problems.append(f"races in tests not explained: {sorted(n for n in raced if not known(n))[:5]}")
        for name in raced:
            if "in test " not in texts[name] or name.split("::")[-1] not in texts[name]:
                problems.append(f"{name}'s race does not name it")
        unattributed = [(kind, test) for kind, test in named
                        if test is None or not any(test.endswith(n.split("::")[-1]) for n in raced)]
        if unattributed:
            problems.append(f"races in the reports not failing their test: {unattributed[:5]}")
        if project in KNOWN_RACY and not raced:
            problems.append(f"{label} did not fail with its race")
        row = {"suite": suite, "native": native, "streamsan": under, "raced": sorted(raced), "reports": named,
               "exit": status, "problems": problems}
        rows.append(row)
        counts = lambda o: {k: sum(v == k for v in o.values()) for k in ("passed", "failed", "error", "skipped")}  # noqa: E731
        print(f"{'ok' if not problems else 'FAIL'} {suite}: native {counts(native)}, --streamsan {counts(under)}, "
              f"failed with races: {sorted(raced)}", flush=True)
        for problem in problems:
            print(f"    {problem}", flush=True)
        expected = (f"every test ends as natively but {label}, which fails with its race, named in the report"
                    if project in KNOWN_RACY else "every test ends as natively, no race reported")
        observed = (f"{len(under)} tests, {len(changed)} ended otherwise, {len(raced)} failed with races; "
                    f"{len(named)} races in the reports")
        result.case(suite, expected, observed, ok=not problems,
                    figures={"native": counts(native), "streamsan": counts(under), "raced": len(raced),
                             "reports": len(named)},
                    note="; ".join(problems) or None)
    with open(os.path.join(out, "pytest.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return result.write(out, provenance())


if __name__ == "__main__":
    sys.exit(main())
