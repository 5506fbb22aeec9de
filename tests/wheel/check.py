"""Checks the Python wheel as a user gets it: run with the python of a fresh virtual environment
into which the wheel (with pytest and, if at hand, pytest-xdist) was installed, from the
repository root, with the stand-in driver's folder (a libcuda.so.1) on LD_LIBRARY_PATH:

    python tests/wheel/check.py OUT_DIR

1. `streamsan run -- python tests/scenarios/python_race.py`: the use-before-alloc reported at
   the script's line, exit 66.
2. `pytest --streamsan tests/wheel/suite` (and with `-n 2` under pytest-xdist): the two racy
   tests fail, each with its race naming it, in the error and in the JSON report; the others
   pass.
Exits 1 at the first check that fails."""

import glob
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

BIN = os.path.dirname(sys.executable)
SUITE = os.path.join("tests", "wheel", "suite")
RACY = {"test_streams.py::test_racy", "test_streams.py::test_racy_again"}
CLEAN = {"test_streams.py::test_ordered", "test_streams.py::test_host_only", "test_streams.py::test_ordered_after"}


def fail(why, output=""):
    sys.exit(f"check.py: {why}\n{output[-6000:]}")


def run(argv, **kw):
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    return done.returncode, done.stdout + done.stderr


def demo(out):
    reports = os.path.join(out, "demo.%p.json")
    status, output = run([os.path.join(BIN, "streamsan"), "run", "--report", reports, "--",
                          sys.executable, os.path.join("tests", "scenarios", "python_race.py")])
    print(output, end="")
    if status != 66 or "WARNING: streamsan: use-before-alloc" not in output or "python_race.py:" not in output:
        fail(f"the demo exited {status}, not 66 with a use-before-alloc at python_race.py", output)


def tests(out, name, extra):
    """`pytest --streamsan` on the suite: which tests failed, with what, and the reports' races."""
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    junit = os.path.join(folder, "junit.xml")
    argv = [os.path.join(BIN, "pytest"), "--streamsan", "--streamsan-args",
            f"--report {folder}/streamsan.%p.json", "-p", "no:cacheprovider", f"--junitxml={junit}",
            "--rootdir", SUITE, SUITE, *extra]
    status, output = run(argv)
    print(output[-3000:], end="")
    if status != 1:
        fail(f"{name}: pytest exited {status}, not 1 (tests failed)", output)
    failed, passed = {}, set()
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = f"test_streams.py::{case.get('name')}"
        failure = case.find("failure")
        if failure is not None:
            failed[test] = (failure.get("message") or "") + (failure.text or "")
        elif case.find("error") is None and case.find("skipped") is None:
            passed.add(test)
    if set(failed) != RACY or passed != CLEAN:
        fail(f"{name}: failed {sorted(failed)}, passed {sorted(passed)}; expected {sorted(RACY)} to fail", output)
    for test, text in failed.items():
        if "WARNING: streamsan: use-before-alloc" not in text or f"in test {test}:" not in text:
            fail(f"{name}: {test} failed without its race naming it", text)
    named = []
    for path in glob.glob(os.path.join(folder, "streamsan.*.json")):
        with open(path) as f:
            named += [race["second"].get("test") for race in json.load(f)["races"]]
    if sorted(named) != sorted(RACY):
        fail(f"{name}: the reports' races name the tests {named}, not {sorted(RACY)}")
    print(f"check.py: {name}: the racy tests failed with their races, the others passed")


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    demo(out)
    tests(out, "pytest", [])
    try:
        import xdist  # noqa: F401
    except ImportError:
        print("check.py: pytest-xdist is not installed: its check is skipped")
        return
    tests(out, "pytest-xdist", ["-n", "2"])


main()
