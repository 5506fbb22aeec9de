"""Runs the footprint cases (racy and fixed twins) natively and under each footprint mode, and
checks: a racy twin reported as a cross-stream race between its two kernels where the mode can
see it and clean where it cannot, a fixed twin clean, outputs and exit statuses as native.
Writes result-footprint.json (tests/gpu/result.py) and footprint_cases.json.
Usage: run.py STREAMSAN BUILD_DIR OUT_DIR [MODES...]"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from result import Result, short_kernel  # noqa: E402

streamsan, build, out = sys.argv[1:4]
modes = sys.argv[4:] or ["exact", "learn", "params"]
# Each case: its command, the kernels of its race (first, second), the modes that see it, and
# the modes it runs in (all when not given).
# exact and learn measure the bytes a kernel touches (learn a kernel's first launch, and each
# kernel here launches once), so they see every racy twin. params takes each pointer parameter
# as the one byte it points at (docs/footprints.md): the interior pointer, the pointer inside
# a by-value struct and the view point at other bytes than the writer's, so it sees numba's
# race alone (one array passed to both kernels, the writer's slot an output since it first
# wrote fresh memory): the strided kernels' pointers and a struct's two buffers are of
# unknown direction, which two kernels never conflict through.
MEASURED = {"exact", "learn"}
cases = [
    ("interior", [f"{build}/cases", "interior"], ("write_all", "sum_part"), MEASURED),
    ("struct", [f"{build}/cases", "struct"], ("fill_args", "fill_args"), MEASURED),
    ("strided", [f"{build}/cases", "strided"], ("write_strided", "write_strided"), MEASURED),
    ("async", [f"{build}/cases", "async"], ("write_all", "sum_async"), MEASURED),
    # params reports both twins of pair: a guess from the struct's words, which measured
    # footprints replace (docs/footprints.md), so it runs in the measured modes only.
    ("pair", [f"{build}/cases", "pair"], ("fill_pair", "fill_pair"), MEASURED, MEASURED),
    # Kernel nodes of graphs, measured on twins at a graph launch; each graph launched 3 times.
    # params sees neither: the pointers name two different bytes, of unknown direction.
    ("graph", [f"{build}/cases", "graph"], ("write_all", "fill_args"), MEASURED),
    ("built", [f"{build}/cases", "built"], ("write_all", "fill_args"), MEASURED),
    ("graph_same", [f"{build}/cases", "graph_same"], ("fill_args", "fill_args"), MEASURED),
    # Programmatic dependent launch on one stream: the dependent that never waits on its grid
    # dependencies races with the kernel ahead of it where its code was read (the measured
    # modes), and so does one that reads the kernel's output before its wait; params does not
    # read code, and notes the launch. A dependent reading weights before its wait is clean
    # everywhere (no racy twin: both run the same).
    ("programmatic", [f"{build}/cases", "programmatic"], ("write_all", "sum_nowait"), MEASURED),
    ("programmatic_weights", [f"{build}/cases", "programmatic_weights"], ("write_all", "scale_waits"), set()),
    ("programmatic_early", [f"{build}/cases", "programmatic_early"], ("write_all", "read_then_wait"), MEASURED),
    # The same in graphs: captured from the stream (capture joins the two kernel nodes by a
    # programmatic edge), or built with a programmatic edge from write_all's programmatic port
    # (by cudaGraphAddKernelNode and cudaGraphAddDependencies, or by cudaGraphAddNode).
    ("programmatic_graph", [f"{build}/cases", "programmatic_graph"], ("write_all", "sum_nowait"), MEASURED),
    ("programmatic_graph_weights", [f"{build}/cases", "programmatic_graph_weights"], ("write_all", "scale_waits"), set()),
    ("programmatic_built", [f"{build}/cases", "programmatic_built"], ("write_all", "sum_nowait"), MEASURED),
    ("programmatic_node", [f"{build}/cases", "programmatic_node"], ("write_all", "sum_nowait"), MEASURED),
    # Arrays side by side in one 32 KiB granule: an input beside an output is a read and a
    # write, and the blocks between two arrays a kernel reads are not its own. The fixed
    # twins touch other bytes with no wait, which params (one byte per pointer) sees as its
    # guess allows, so they run in the measured modes only.
    ("neighbours", [f"{build}/cases", "neighbours"], ("copy_plus", "copy_plus"), MEASURED, MEASURED),
    ("between", [f"{build}/cases", "between"], ("sum_two", "write_all"), MEASURED, MEASURED),
    # A tensor list's arrays in one granule, each 512 bytes past a KiB: each keeps its own
    # bytes, so a read of the gap after one is no race (fixed, measured modes only as above).
    ("list", [f"{build}/cases", "list"], ("write_list", "sum_part"), MEASURED, MEASURED),
    # Two copies of one 40 MB array into arrays of their own, on two streams with no wait:
    # each launch's reads and writes overflow a table, and its covers keep the input
    # read-only (fixed, measured modes only as above); into one array, a race (racy).
    ("large_input", [f"{build}/cases", "large_input"], ("copy_plus", "copy_plus"), MEASURED, MEASURED),
    # The writer's module has variables of its own (a count of launches, a constant, CCCL's
    # tags): measured on a twin that must give the count back (the case checks it).
    ("stateful", [f"{build}/cases", "stateful"], ("counted_write", "sum_written"), MEASURED),
    # The same writer as a graph node, the reader a node of another module: the writer is
    # measured with its variables copied around the whole graph.
    ("stateful_graph", [f"{build}/cases", "stateful_graph"], ("counted_write", "sum_part"), MEASURED),
    ("torch_view", [sys.executable, "tests/gpu/footprint/torch_view.py"],
     ("vectorized_elementwise_kernel", "reduce_kernel"), MEASURED),
    ("numba", [sys.executable, "tests/gpu/footprint/numba_streams.py"], ("writer", "reader"), MEASURED | {"params"}),
]


def kernel(side):
    """A race side's kernel by its bare name (no namespace, template or ABI tags), or its API."""
    return short_kernel(side.get("kernel") or side.get("api")).split("::")[-1]


results = []
result = Result("footprint")
failed = 0
for name, argv, kernels, seen_by, *runs in cases:
    for twin in ["racy", "fixed"]:
        native = subprocess.run(argv + [twin], capture_output=True, text=True, timeout=120)
        for mode in [m for m in modes if not runs or m in runs[0]]:
            report = f"{build}/{name}.{twin}.{mode}.json"
            r = subprocess.run([streamsan, "run", "--footprint", mode, "--report", report, "--exitcode", "0", "--quiet", "--"] + argv + [twin], capture_output=True, text=True, timeout=120)
            races, notes, pairs = [], [], []
            if os.path.exists(report):
                rep = json.load(open(report))
                races = [(x["kind"], x.get("hazard"), x["first"].get("kernel") or x["first"].get("api"), x["second"].get("kernel") or x["second"].get("api")) for x in rep["races"]]
                pairs = [(x["kind"], kernel(x["first"]), kernel(x["second"])) for x in rep["races"]]
                notes = [n["kind"] for n in rep.get("notes", [])]
            # A racy twin's result is the race's: it may differ from one run to the next,
            # natively too; its exit status may not. A fixed twin's output is determined.
            same = r.returncode == native.returncode and (twin == "racy" or r.stdout == native.stdout)
            seen = twin == "racy" and mode in seen_by
            if seen:
                expected = f"cross-stream-race: {kernels[0]} -> {kernels[1]}"
                found = {k for k, _, _ in pairs} == {"cross-stream-race"} and (("cross-stream-race",) + kernels) in pairs
            else:
                expected = "clean" if twin == "fixed" else f"clean ({mode} cannot see it)"
                found = not races
            # A programmatic dependent is noted where it is not known which of its accesses
            # come before its wait: params reads no code. The measured modes read the cases'
            # sm_90 code (run.sh builds them for sm_90), for whether each kernel waits and
            # where it first waits, and mark what comes before it: nothing is noted.
            if name.startswith("programmatic"):
                noted = "programmatic-launch" in notes
                expect_noted = mode not in MEASURED
                expected += ", noted" if expect_noted else ", not noted"
                found = found and noted == expect_noted
            ok = same and found
            failed += not ok
            row = {"case": name, "twin": twin, "mode": mode, "races": races, "notes": notes, "status": r.returncode, "native_status": native.returncode, "same_output": same, "ok": ok}
            if not same:
                row["stdout"], row["native_stdout"], row["stderr"] = r.stdout[-500:], native.stdout[-500:], r.stderr[-1500:]
            results.append(row)
            observed = "; ".join(f"{k} {h or ''} {a} -> {b}".replace("  ", " ") for (k, h, _, _), (_, a, b) in zip(races, pairs)) or "clean"
            if name.startswith("programmatic"):
                observed += ", noted" if "programmatic-launch" in notes else ", not noted"
            result.case(f"{name}/{twin}/{mode}", expected, observed, ok=ok,
                        note=None if same else f"exit {r.returncode} (natively {native.returncode}), output {'the same' if r.stdout == native.stdout else 'differs'}")
            print(("ok  " if ok else "FAIL"), name, twin, mode, "races:", races, "notes:", notes, "" if same else f"DIFFERS native={native.returncode}:{native.stdout.strip()!r} run={r.returncode}:{r.stdout.strip()!r} {r.stderr[-800:]}", flush=True)
json.dump(results, open(os.path.join(out, "footprint_cases.json"), "w"), indent=1)
result.write(out)
print("failed:", failed)
sys.exit(1 if failed else 0)
