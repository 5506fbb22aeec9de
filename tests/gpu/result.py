"""One run's result, as every GPU runner writes it: a small JSON file (results/README.md, the
format; results/schema.json, its schema) with the machine and build from provenance.sh, the
command, STREAMSAN_OPTIONS and a row per case: expected, observed, pass/fail/skip.

    from result import Result           # tests/gpu/ on sys.path
    result = Result("scenarios")
    result.case("runtime/cross_stream_raw/racy", "cross-stream-race", "cross-stream-race", ok=True)
    status = result.write(out_dir)      # OUT_DIR/result-scenarios.json; 1 if a case failed

STREAMSAN_RESULT_VARIANT names a run apart from the suite's plain one (host-races-on, ...).
"""
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def provenance(text=None):
    """The date, GPU, driver, commit and shim sha256 of provenance.sh's output (run now unless
    given); None where it names none."""
    if text is None:
        text = subprocess.run(["sh", os.path.join(HERE, "provenance.sh")], capture_output=True, text=True).stdout
    found = {"date": None, "gpu": None, "gpus": 0, "driver": None, "commit": None, "shim_sha256": None,
             "experiments_shim_sha256": None}
    for line in text.splitlines():
        if line.startswith("experiments shim sha256 (as run): "):
            found["experiments_shim_sha256"] = line.split(": ", 1)[1].strip() or None
        if line.startswith("date: "):
            found["date"] = line.split(": ", 1)[1].strip()
        elif line.startswith("build: commit: "):
            found["commit"] = line.split(": ", 2)[2].strip()
        elif line.startswith("shim sha256 (as run): "):
            found["shim_sha256"] = line.split(": ", 1)[1].strip() or None
        elif re.match(r"^[^:]+, \d+\.\d+(\.\d+)?$", line.strip()):
            # nvidia-smi's "name, driver_version", one line a GPU.
            name, driver = line.strip().rsplit(", ", 1)
            found["gpu"], found["driver"] = found["gpu"] or name, found["driver"] or driver
            found["gpus"] += 1
    return found


def cuda_version():
    """The toolkit's release (nvcc --version), or None without one."""
    try:
        text = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def command_line(argv=None):
    """What ran: the command that started this runner where it says (STREAMSAN_RESULT_VIA,
    which tests/gpu/all.sh and toggle.sh set), else this runner's command line, paths under
    the working directory made relative."""
    via = os.environ.get("STREAMSAN_RESULT_VIA")
    if via:
        return via
    cwd = os.getcwd() + os.sep
    return shlex.join(["python3"] + [a.replace(cwd, "") for a in (argv or sys.argv)])


def kinds_text(kinds, expected=""):
    """Race kinds as a case shows them: "clean", or comma-separated in the expectation's order."""
    if not kinds:
        return "clean"
    order = [k for k in expected.split(",") if k in kinds]
    return ",".join(order + sorted(k for k in set(kinds) if k not in order))


def short_kernel(name):
    """A kernel or API name without its return type, template arguments, parameters or numba's
    ABI tags: what a table can show."""
    if not name:
        return name
    name = re.sub(r"^void ", "", name)
    for stop in ("<", "(", "["):
        cut = name.find(stop)
        if cut > 0:
            name = name[:cut]
    return name


def result_path(out_dir, suite):
    """Where a runner writes its result: OUT_DIR/result-SUITE[-VARIANT].json."""
    variant = os.environ.get("STREAMSAN_RESULT_VARIANT")
    return os.path.join(out_dir, f"result-{suite}{'-' + variant if variant else ''}.json")


class Result:
    def __init__(self, suite):
        self.suite = suite
        self.variant = os.environ.get("STREAMSAN_RESULT_VARIANT") or None
        self.cases = []
        self.note = None
        self.command = command_line()

    def case(self, name, expected, observed, ok=None, outcome=None, figures=None, note=None):
        """A case's row: `outcome` ("pass", "fail", "skip"), or `ok` for pass or fail."""
        outcome = outcome or ("pass" if ok else "fail")
        assert outcome in ("pass", "fail", "skip"), outcome
        row = {"name": name, "expected": expected, "observed": observed, "outcome": outcome}
        if figures:
            row["figures"] = figures
        if note:
            row["note"] = note
        self.cases.append(row)
        return row

    def failed(self):
        return sum(c["outcome"] == "fail" for c in self.cases)

    def as_dict(self, provenance_text=None):
        found = provenance(provenance_text)
        result = {"suite": self.suite}
        if self.variant:
            result["variant"] = self.variant
        result["date"] = found["date"]
        result["gpu"] = found["gpu"] or "none"
        if found["gpus"] > 1:
            result["gpus"] = found["gpus"]
        if found["driver"]:
            result["driver"] = found["driver"]
        cuda = cuda_version()
        if cuda:
            result["cuda"] = cuda
        result["build"] = {"commit": found["commit"], "shim_sha256": found["shim_sha256"]}
        if found["experiments_shim_sha256"]:
            result["build"]["experiments_shim_sha256"] = found["experiments_shim_sha256"]
        result["command"] = self.command
        result["options"] = os.environ.get("STREAMSAN_OPTIONS", "")
        result["cases"] = self.cases
        result["summary"] = {o: sum(c["outcome"] == o for c in self.cases) for o in ("pass", "fail", "skip")}
        if self.note:
            result["note"] = self.note
        return result

    def write(self, out_dir, provenance_text=None):
        """Writes result_path(); returns 1 if a case failed, else 0."""
        path = result_path(out_dir, self.suite)
        result = self.as_dict(provenance_text)
        with open(path, "w") as f:
            f.write(dumps(result))
        print(f"result: {path}: {result['summary']}", flush=True)
        return 1 if self.failed() else 0


def add_case(path, name, expected, observed, ok, note=None):
    """Adds a case to a result already written (a check its runner makes after the others);
    returns 1 if it failed, else 0."""
    with open(path) as f:
        result = json.load(f)
    row = {"name": name, "expected": expected, "observed": observed, "outcome": "pass" if ok else "fail"}
    if note:
        row["note"] = note
    result["cases"].append(row)
    result["summary"] = {o: sum(c["outcome"] == o for c in result["cases"]) for o in ("pass", "fail", "skip")}
    with open(path, "w") as f:
        f.write(dumps(result))
    return 0 if ok else 1


def dumps(result):
    """A result as results/ keeps it: a case a line, so that files stay small and diffs read."""
    lines = []
    for key, value in result.items():
        if key == "cases":
            rows = ",\n".join(f"    {json.dumps(c, ensure_ascii=False)}" for c in value)
            lines.append(f'  "cases": [\n{rows}\n  ]' if value else '  "cases": []')
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
