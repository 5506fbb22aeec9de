#!/usr/bin/env python3
"""The results of the GPU and bench runs (results/*.json) and the tables made from them.

    python3 scripts/results.py            validate results/ and rewrite every generated table
    python3 scripts/results.py --check    validate, and fail if a generated table is out of date
    python3 scripts/results.py add FILE [--variant NAME]
                                          validate a runner's result-SUITE.json and copy it into
                                          results/ under its name (replacing the suite's older run)

A generated table sits between `<!-- results:NAME -->` and `<!-- /results:NAME -->` in
README.md, docs/validation.md or docs/performance.md; NAME is one of GENERATORS below. Files
without such markers are left alone. Python 3.11 standard library only.
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
from result import dumps  # noqa: E402  (the layout results/ keeps: a case a line)

RESULTS = ROOT / "results"
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "validation.md", ROOT / "docs" / "performance.md"]
MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 200 * 1024
BLOCK = re.compile(r"(<!-- results:([a-z0-9-]+) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)

# What each suite checks or measures, in the order the tables list them.
SUITES = {
    "scenarios": "racy and fixed twins of every rule, driver and runtime API (and NCCL on two GPUs)",
    "host-races": "host races: the host's own accesses against copies, memsets and kernels in flight",
    "footprint": "races that kernel parameters hide, under each footprint mode",
    "footprint-twin": "a patched twin of a module beside the program's own, unpatched",
    "apps": "real programs of nine frameworks, clean and with one wait removed",
    "suites": "numba-cuda's and Warp's own test suites, natively and under streamsan",
    "pytest": "numba-cuda's, Warp's and our PyTorch tests under `pytest --streamsan`, from the wheel",
    "cusan": "CuSan's runtime tests (no MPI), racy and fixed variants, under streamsan",
    "toggle": "the whole shim against every hook forwarded, inside one process",
    "perf": "real programs, native and streamsan processes alternated",
    "footprint-perf": "footprint=params, learn and exact against native, exact against its empty-patch floor",
    "steady": "a launch's cost on the program's thread, per part",
    "bench-count": "the bench's launch path counted under callgrind (no GPU)",
}
CORRECTNESS = ["scenarios", "host-races", "footprint", "footprint-twin", "apps", "suites", "pytest", "cusan"]
PROGRAMS = {
    "gpt2": "GPT-2 training step",
    "resnet18_prefetch": "ResNet-18, side-stream prefetcher",
    "ddp": "DDP over NCCL, one rank",
    "gcn": "GCN training step",
    "maskrcnn": "Mask R-CNN inference",
    "compiled_mlp": "torch.compile'd MLP",
    "launch_bound": "`launch_bound` (2000 small launches)",
    "compute_bound": "`compute_bound` (large matmuls)",
}


# ---- validation ---------------------------------------------------------------------------

def check_schema(value, schema, root, where):
    """The errors of `value` against `schema`: the part of JSON Schema results/schema.json uses."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    errors = []
    kinds = schema.get("type")
    if kinds:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        actual = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            actual = "integer" if isinstance(value, int) else "number"
        if actual not in kinds and not (actual == "integer" and "number" in kinds):
            return [f"{where}: {actual}, not {' or '.join(kinds)}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, (int, float)) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} is under {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: no {key!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                errors += check_schema(item, properties[key], root, f"{where}.{key}")
            elif extra is False:
                errors.append(f"{where}: unknown field {key!r}")
            elif isinstance(extra, dict):
                errors += check_schema(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += check_schema(item, schema["items"], root, f"{where}[{i}]")
    return errors


def file_name(result):
    variant = f"-{result['variant']}" if result.get("variant") else ""
    return f"{result['date'][:10]}-{result['suite']}{variant}.json"


def validate(path, result, schema):
    errors = check_schema(result, schema, schema, path.name)
    if errors:
        return errors
    if path.parent == RESULTS and path.name != file_name(result):
        errors.append(f"{path.name}: named {file_name(result)} by its date, suite and variant")
    counted = {o: sum(c["outcome"] == o for c in result["cases"]) for o in ("pass", "fail", "skip")}
    if counted != result["summary"]:
        errors.append(f"{path.name}: summary {result['summary']} but the cases count {counted}")
    if result["build"]["shim_sha256"] is None and "note" not in result:
        errors.append(f"{path.name}: no shim sha256 and no note saying why")
    if path.stat().st_size > MAX_FILE_BYTES:
        errors.append(f"{path.name}: {path.stat().st_size} bytes, over {MAX_FILE_BYTES}: keep results small, no raw logs")
    return errors


def load():
    schema = json.loads((RESULTS / "schema.json").read_text())
    results, errors, total, keys = [], [], 0, {}
    for path in sorted(RESULTS.glob("*.json")):
        if path.name == "schema.json":
            continue
        total += path.stat().st_size
        try:
            result = json.loads(path.read_text())
        except ValueError as e:
            errors.append(f"{path.name}: not JSON ({e})")
            continue
        problems = validate(path, result, schema)
        errors += problems
        if not problems:
            key = (result["suite"], result.get("variant"))
            if key in keys:
                errors.append(f"{path.name} and {keys[key]}: one file a suite and variant (the latest run)")
            keys[key] = path.name
            result["_file"] = path.name
            results.append(result)
    if total > MAX_TOTAL_BYTES:
        errors.append(f"results/: {total} bytes in all, over {MAX_TOTAL_BYTES}")
    return results, errors


# ---- tables -------------------------------------------------------------------------------

def table(header, rows):
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def of_suite(results, suite):
    order = lambda r: (r.get("variant") is not None, r.get("variant") or "")  # noqa: E731
    return sorted((r for r in results if r["suite"] == suite), key=order)


def label(result):
    return result["suite"] + (f" ({result['variant']})" if result.get("variant") else "")


def machine(result):
    count = f"{result['gpus']}x " if result.get("gpus") else ""
    return f"{count}{result['gpu']}" if result["gpu"] != "none" else result.get("host", "no GPU")


def shim(result):
    sha = result["build"]["shim_sha256"]
    return f"`{sha[:8]}`" if sha else "(not recorded)"


def outcome(result, names=True):
    s, total = result["summary"], len(result["cases"])
    if result["suite"] not in CORRECTNESS:
        text = f"{total} measured"
        return text + (f", {s['fail']} failed" if s["fail"] else "")
    text = f"{s['pass']} of {s['pass'] + s['fail']} passed"
    if s["fail"] and names:
        text += " (" + ", ".join(c["name"] for c in result["cases"] if c["outcome"] == "fail") + " failed)"
    if s["skip"]:
        text += f", {s['skip']} not run"
    return text


def x(value, digits=3):
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return f"{value:.{digits}f}x"


def spread(figure, unit=""):
    if not figure:
        return "—"
    return f"{figure['median']:g}{unit} ({figure['min']:g}-{figure['max']:g})"


def summary(results):
    rows = []
    for suite in SUITES:
        runs_ = of_suite(results, suite)
        if not runs_:
            continue
        machines = ", ".join(dict.fromkeys(machine(r) for r in runs_))
        outcomes = "; ".join((f"{r['variant']}: " if r.get("variant") else "") + outcome(r, names=False) for r in runs_)
        rows.append([suite, SUITES[suite], machines, max(r["date"][:10] for r in runs_), outcomes])
    text = table(["suite", "what", "machine", "last run", "outcome"], rows)
    cost = cost_rows(results)
    if cost:
        text += "\n\n" + table(["program", "streamsan (whole shim, one process)", "memcheck", "CSAN"], cost)
    return text


def cost_rows(results):
    toggles = [r for r in of_suite(results, "toggle") if (r.get("variant") or "").startswith("run") or not r.get("variant")]
    slow = {}
    for r in of_suite(results, "perf"):
        for c in r["cases"]:
            for tool in ("memcheck", "csan"):
                if f"{tool}_x" in c.get("figures", {}):
                    slow.setdefault((c["name"], tool), c["figures"][f"{tool}_x"])
    rows = []
    for program in PROGRAMS:
        ratios = [c["figures"]["whole_shim_x"] for r in toggles for c in r["cases"] if c["name"] == program]
        if ratios or (program, "memcheck") in slow:
            rows.append([PROGRAMS[program], ", ".join(x(v) for v in ratios) or "—",
                         x(slow.get((program, "memcheck")), 1), x(slow.get((program, "csan")), 1)])
    return rows


def runs(results, suites):
    rows = []
    for suite in suites:
        for r in of_suite(results, suite):
            options = f"`STREAMSAN_OPTIONS={r['options']}` " if r["options"] else ""
            rows.append([label(r), machine(r), r["date"][:10], shim(r), outcome(r), f"{options}`{r['command']}`"])
    return table(["suite", "machine", "date", "shim", "outcome", "command"], rows)


def validation_runs(results):
    return runs(results, CORRECTNESS)


def cost_runs(results):
    return runs(results, [s for s in SUITES if s not in CORRECTNESS])


def misses(results):
    rows = [[label(r), f"`{c['name']}`", c["expected"], c["observed"], c.get("note", "")]
            for suite in CORRECTNESS for r in of_suite(results, suite)
            for c in r["cases"] if c["outcome"] != "pass"]
    rows = rows or [["—", "every case passed", "", "", ""]]
    return table(["suite", "case", "expected", "observed", "why"], rows)


def by_prefix(results, suite, title):
    rows = []
    for r in of_suite(results, suite):
        groups = {}
        for c in r["cases"]:
            groups.setdefault(c["name"].split("/")[0], []).append(c)
        for group, cases in groups.items():
            passed = sum(c["outcome"] == "pass" for c in cases)
            skipped = sum(c["outcome"] == "skip" for c in cases)
            rows.append([group, label(r), len(cases), passed, len(cases) - passed - skipped, skipped])
    return table([title, "run", "cases", "passed", "failed", "not run"], rows)


def scenarios(results):
    return by_prefix(results, "scenarios", "program")


def host_races(results):
    return by_prefix(results, "host-races", "program")


def footprint(results):
    rows = []
    for r in of_suite(results, "footprint"):
        cells = {}
        for c in r["cases"]:
            name, twin, mode = c["name"].split("/")
            mark = "" if c["outcome"] == "pass" else " **(failed)**"
            cells.setdefault((name, twin), {})[mode] = c["observed"] + mark
        modes = list(dict.fromkeys(c["name"].split("/")[2] for c in r["cases"]))
        for (name, twin), by_mode in cells.items():
            rows.append([name, twin] + [by_mode.get(m, "") for m in modes])
        return table(["case", "twin"] + [f"`{m}`" for m in modes], rows)
    return "(no footprint result)"


def footprint_twin(results):
    """A row a mode and patch: its checks, and its timings' medians (ranges) over the rounds."""
    rows = []
    for r in of_suite(results, "footprint-twin"):
        by_run = {}
        for c in r["cases"]:
            run, check = c["name"].rsplit("/", 1)
            by_run.setdefault(run, []).append(c)
        for run, cases in by_run.items():
            checks = [c for c in cases if c["name"].rsplit("/", 1)[1] != "timings"]
            failed = [c["name"].rsplit("/", 1)[1] for c in checks if c["outcome"] != "pass"]
            figures = next((c.get("figures", {}) for c in cases if c["name"].endswith("/timings")), {})
            us = lambda k: (f"{figures[k]['median']} ({figures[k]['min']}-{figures[k]['max']})"  # noqa: E731
                            if k in figures else "")
            rows.append([run, f"{len(checks) - len(failed)} of {len(checks)}" + (f" (failed: {', '.join(failed)})"
                                                                               if failed else ""),
                         us("own_empty_submit_us"), us("own_1m_writes_device_us"),
                         us("twin_1m_writes_no_data_device_us"), us("twin_1m_writes_counting_device_us")])
        return table(["mode / patch", "checks held", "own empty launch, submit µs", "own 1M-int write, GPU µs",
                      "twin's, no data, GPU µs", "twin's, measuring, GPU µs"], rows)
    return "(no footprint-twin result)"


def apps(results):
    """A row a program, a column for default options and one for each STREAMSAN_OPTIONS run."""
    columns, rows = {}, {}
    for r in of_suite(results, "apps"):
        column = f"`{r['options']}`" if r["options"] else "default options"
        columns.setdefault(column, None)
        for c in r["cases"]:
            row = rows.setdefault(c["name"], {"expected": c["expected"]})
            row[column] = c["observed"] + ("" if c["outcome"] == "pass" else " **(not as expected)**")
    header = ["framework", "allocator", "program", "expected"] + [f"reported, {c}" for c in columns]
    return table(header, [name.split(" / ") + [row["expected"]] + [row.get(c, "not run") for c in columns]
                          for name, row in rows.items()])


def suites(results):
    rows = []
    for r in of_suite(results, "suites"):
        for c in r["cases"]:
            f = c["figures"]
            counts = lambda k: "ran {ran}, {failures} failed, {errors} errors, {skipped} skipped".format(**f[k])  # noqa: E731
            rows.append([c["name"], counts("native"), counts("streamsan"), f["reports"],
                         "yes" if c["outcome"] == "pass" else "**no**"])
    return table(["suite", "natively", "under streamsan", "reports", "same counts"], rows)


def toggle_table(runs_):
    header = ["program"] + [f"{r.get('variant') or 'run'} ({r['gpu']}, {r['date'][:10]}, shim {shim(r)})"
                            + (f", `{r['options']}`" if r["options"] else "") for r in runs_]
    rows = []
    for program in PROGRAMS:
        cells = []
        for r in runs_:
            f = next((c["figures"] for c in r["cases"] if c["name"] == program), None)
            cells.append(f"**{x(f['whole_shim_x'])}** ({f['steps']} steps; at full speed {x(f.get('full_speed_x'))})"
                         if f else "")
        if any(cells):
            rows.append([PROGRAMS[program]] + cells)
    return table(header, rows)


def toggle(results):
    return toggle_table([r for r in of_suite(results, "toggle") if not r["options"]])


def toggle_options(results):
    return toggle_table([r for r in of_suite(results, "toggle") if r["options"]])


def perf(results):
    rows = []
    for r in of_suite(results, "perf"):
        for c in r["cases"]:
            f = c["figures"]
            # A hand-run check has no rounds: one process, native where one ran beside it.
            steps, native, pairs = f.get("full_speed_steps", {}), f.get("native_step_ms"), f.get("streamsan_pairs_x")
            pooled = (f"{x(f['streamsan_full_speed_pooled_x'])} ({steps['native']} native, {steps['streamsan']} "
                      "streamsan steps)" if f.get("streamsan_full_speed_pooled_x") else "—")
            # Other streamsan modes of the run (PERF_VARIANTS): name, ratio and round pairs.
            variants = [k[:-2] for k in f if k.endswith("_x") and not k.endswith(("_pairs_x", "_pooled_x"))
                        and k[:-2] not in ("streamsan", "memcheck", "csan")]
            others = "; ".join(f"{m}: {x(f.get(m + '_x'))}" + (
                f" ({f[m + '_pairs_x']['min']:.2f}-{f[m + '_pairs_x']['max']:.2f})"
                if f.get(m + "_pairs_x") else "") for m in variants)
            wall = (f"{spread(f['native_process_s'], ' s')} native, {spread(f['streamsan_process_s'], ' s')} streamsan"
                    if f.get("native_process_s") and f.get("streamsan_process_s") else "—")
            ratio = (f"{x(f['streamsan_x'])} ({pairs['min']:.2f}-{pairs['max']:.2f})" if pairs else
                     x(f["streamsan_x"]) if "streamsan_x" in f else f"{f['streamsan_step_ms']['median']:.1f} ms")
            rows.append([PROGRAMS.get(c["name"], c["name"]), f"{r['gpu']}, {r['date'][:10]}, shim {shim(r)}",
                         f.get("processes", 1),
                         f"{native['median']:.1f} ms ({native['min']:.1f}-{native['max']:.1f})" if native else "—",
                         ratio, pooled, others or "—", wall,
                         x(f["memcheck_x"], 1) if "memcheck_x" in f else "", x(f["csan_x"], 1) if "csan_x" in f else ""])
    return table(["program", "run", "processes a mode", "native step: median (lowest-highest process)",
                  "streamsan: ratio of medians (round pairs)", "at full speed, pooled", "other modes (round pairs)",
                  "process wall with start and warm-up: median (range)", "memcheck", "CSAN"], rows)


def footprint_perf(results):
    rows = []
    for r in of_suite(results, "footprint-perf"):
        # `exact` (and its experiments' patches) against the empty-patch floor of the same run.
        floors = {c["name"].split("/")[0]: c["figures"]["median_ms"] for c in r["cases"]
                  if c["name"].endswith("/floor") and c.get("figures")}
        for c in r["cases"]:
            workload, mode = c["name"].split("/")
            f = c["figures"]
            if mode == "native":
                continue
            spread_ = f"{f['x_native_spread'][0]:g}-{f['x_native_spread'][1]:g}" if f.get("x_native_spread") else "one process"
            floor = x(f["median_ms"] / floors[workload]) if mode in ("exact", "grouping", "covered") and workload in floors else ""
            steps = f"last {f['window']}" if f.get("window") else ""
            rows.append([workload, f"`{mode}`", f"{f['median_ms']:g} ms", f"**{x(f['x_native'])}**", floor, steps,
                         spread_, f"{r['gpu']}, {r['date'][:10]}"])
    return table(["workload", "mode", "step, median", "against native", "against the floor", "steps",
                  "spread of the rounds", "run"], rows)


def steady(results):
    rows = []
    for r in of_suite(results, "steady"):
        for c in r["cases"]:
            f = c["figures"]
            rows.append([PROGRAMS.get(c["name"], c["name"]), f["driver_launch_ns"], f["capture_ns"],
                         f["python_frames_ns"], f["kernel_lookup_ns"], f["scan_ns"], f["model_update_ns"],
                         f["capture_share_of_driver"]])
    return table(["program", "driver's launch (ns)", "call-site capture", "of which Python frames",
                  "kernel name and layout", "parameter scan", "model update (watcher thread)",
                  "capture / driver"], rows)


def bench_count(results):
    rows = []
    for r in of_suite(results, "bench-count"):
        for c in r["cases"]:
            f = c["figures"]
            rows.append([c["name"], f["instructions"], f["l1d_read_misses"], f["l1d_write_misses"], f["mispredicted"]])
    return table(["part (per call)", "instructions", "L1d read misses", "L1d write misses", "mispredicted branches"], rows)


GENERATORS = {
    "summary": summary,
    "validation-runs": validation_runs,
    "misses": misses,
    "scenarios": scenarios,
    "host-races": host_races,
    "footprint": footprint,
    "footprint-twin": footprint_twin,
    "apps": apps,
    "suites": suites,
    "cost-runs": cost_runs,
    "toggle": toggle,
    "toggle-options": toggle_options,
    "perf": perf,
    "footprint-perf": footprint_perf,
    "steady": steady,
    "bench-count": bench_count,
}


# ---- documents ----------------------------------------------------------------------------

def regenerate(text, results, where, errors):
    def fill(match):
        name = match.group(2)
        if name not in GENERATORS:
            errors.append(f"{where}: no table named {name!r} (known: {', '.join(GENERATORS)})")
            return match.group(0)
        return f"{match.group(1)}\n{GENERATORS[name](results)}\n\n{match.group(4)}"
    return BLOCK.sub(fill, text)


def add(paths, variant):
    schema = json.loads((RESULTS / "schema.json").read_text())
    status = 0
    for path in map(Path, paths):
        result = json.loads(path.read_text())
        if variant:
            result = {"suite": result["suite"], "variant": variant,
                      **{k: v for k, v in result.items() if k not in ("suite", "variant")}}
        errors = validate(path, result, schema)
        if errors:
            print("\n".join(errors), file=sys.stderr)
            status = 1
            continue
        target = RESULTS / file_name(result)
        for older in RESULTS.glob("*.json"):
            if older.name[11:] == target.name[11:] and older != target:
                older.unlink()
                print(f"removed {older.relative_to(ROOT)} (the suite's older run)")
        target.write_text(dumps(result))
        print(f"added {target.relative_to(ROOT)}")
    return status


def main(argv):
    if argv[:1] == ["add"]:
        args, variant = argv[1:], None
        if "--variant" in args:
            i = args.index("--variant")
            variant, args = args[i + 1], args[:i] + args[i + 2:]
        return add(args, variant)
    check = argv == ["--check"]
    if argv and not check:
        print(__doc__, file=sys.stderr)
        return 2
    results, errors = load()
    stale = []
    for document in DOCUMENTS:
        if not document.exists():
            continue
        text = document.read_text()
        new = regenerate(text, results, document.relative_to(ROOT), errors)
        if new != text:
            stale.append(str(document.relative_to(ROOT)))
            if not check and not errors:
                document.write_text(new)
    if errors:
        print("results: " + "\nresults: ".join(errors), file=sys.stderr)
        return 1
    if check and stale:
        print(f"results: the generated tables in {', '.join(stale)} are not those of results/*.json; "
              "run `python3 scripts/results.py` and commit what it changes", file=sys.stderr)
        return 1
    print(f"results: {len(results)} runs; " + (f"rewrote {', '.join(stale)}" if stale else "every table current"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
