#!/usr/bin/env python3
"""The steps of programs.py processes that left parts of the shim out step by step
(STREAMSAN_TOGGLE, under the `experiments` shim), and of native processes beside them,
compared per mode.

A mode is the bit set the step left out (shim/src/intercept/experiments.rs). Within a toggled
process every mode meets the same process, memory and minutes of the machine (and, the
order shuffled, the same share of the core's two speeds), so a mode's median against
another's is what the parts between them cost, over all steps as over those at full speed
(both probes within FULL_SPEED of the program's fastest probe, as in run.py); the native
processes are other processes, and against them the figures spread as run.py's do.

Usage: toggle.py [--result OUT_DIR] [--against PART] OUT.txt...   (each file with programs.py's
JSON line; other lines ignored). PART: the mode every other is set against, by its bit's name
(default FORWARD_LAUNCHES; FORWARD_ALL gives what the whole shim costs inside a process).
--result writes OUT_DIR/result-toggle.json (tests/gpu/result.py) with, per program, all of the
shim against PART (FORWARD_ALL: the whole shim's cost)."""
import json
import re
import statistics
import sys
from pathlib import Path

from run import FULL_SPEED

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from result import Result  # noqa: E402

# The experiments module's bits, read from where they are defined: name -> bit.
EXPERIMENTS = Path(__file__).resolve().parents[3] / "shim/src/intercept/experiments.rs"
BITS = {name: int(bit) for name, bit in re.findall(r"pub const (\w+): u32 = (\d+);", EXPERIMENTS.read_text())}
PART_NAMES = {bit: name.lower().replace("_", " ") for name, bit in BITS.items()}
# The mode every other is set against unless told: the launch path left out, the rest of the
# shim there.
DEFAULT_BASE = "FORWARD_LAUNCHES"
# What a result calls the base's step time.
BASE_FIGURE = {BITS.get("FORWARD_ALL"): "forward_all", BITS.get("FORWARD_LAUNCHES"): "forward_launches"}


def mode_name(mode):
    if mode == "native":
        return "native (other processes)"
    # A bit the module does not define (a run of another build) is named by its number.
    bits = [1 << i for i in range(32) if mode & (1 << i)]
    return "+".join(PART_NAMES.get(bit, f"bit {bit}") for bit in bits) or "all of the shim"


def runs(paths):
    for path in paths:
        for line in open(path, errors="replace"):
            if line.startswith("{") and '"step_ms"' in line:
                yield path, json.loads(line)


def by_mode(run, keep):
    """A run's step times by mode, of the steps `keep` takes (by their probes)."""
    steps = {}
    modes = run.get("modes") or ["native"] * len(run["step_ms"])
    for mode, t, probes in zip(modes, run["step_ms"], run["probe_ms"]):
        if keep(probes):
            steps.setdefault(mode, []).append(t)
    return steps


def main():
    paths, base, result_dir = sys.argv[1:], BITS[DEFAULT_BASE], None
    if paths[:1] == ["--result"]:
        result_dir, paths = paths[1], paths[2:]
    if paths[:1] == ["--against"]:
        base, paths = BITS[paths[1]], paths[2:]
    result = Result("toggle")
    programs = {}
    for path, run in runs(paths):
        programs.setdefault(run["program"], []).append((path, run))
    for program, procs in programs.items():
        fastest = min(min(pair) for _, run in procs for pair in run["probe_ms"])
        full = lambda probes: max(probes) <= FULL_SPEED * fastest  # noqa: E731
        every, at_full = {}, {}
        for _, run in procs:
            for mode, steps in by_mode(run, lambda _: True).items():
                every.setdefault(mode, []).extend(steps)
            for mode, steps in by_mode(run, full).items():
                at_full.setdefault(mode, []).extend(steps)
        print(f"{program}: fastest probe {fastest} ms; each mode against '{mode_name(base)}'")
        base_every = statistics.median(every[base]) if every.get(base) else None
        base_full = statistics.median(at_full[base]) if at_full.get(base) else None
        for mode in sorted(every, key=lambda m: (m == "native", str(m))):
            median_every = statistics.median(every[mode])
            steps = at_full.get(mode, [])
            median_full = statistics.median(steps) if steps else float("nan")
            against_every = f", {median_every / base_every:.3f}x" if base_every else ""
            against_full = f", {median_full / base_full:.3f}x" if base_full and steps else ""
            print(f"  {mode_name(mode):40} {len(every[mode]):5} steps, median {median_every:8.3f} ms{against_every};"
                  f" at full speed {len(steps):4} steps, median {median_full:8.3f} ms{against_full}")
        if every.get(0) and base_every:
            figures = {"steps": len(every[0]), "whole_shim_ms": round(statistics.median(every[0]), 3),
                       f"{BASE_FIGURE.get(base, 'base')}_ms": round(base_every, 3),
                       "whole_shim_x": round(statistics.median(every[0]) / base_every, 3)}
            if at_full.get(0) and base_full:
                figures["full_speed_steps"] = len(at_full[0])
                figures["full_speed_x"] = round(statistics.median(at_full[0]) / base_full, 3)
            result.case(program, "runs to its end", f"{len(procs)} toggled process(es) ran", ok=True, figures=figures)
        # Each toggled process on its own, over all its steps.
        for path, run in procs:
            steps = by_mode(run, lambda _: True)
            if run.get("modes") and steps.get(base):
                own = statistics.median(steps[base])
                cells = ", ".join(f"{mode_name(m)} {statistics.median(t) / own:.3f}x ({len(t)})"
                                  for m, t in sorted(steps.items()) if m != base)
                print(f"    {path}: {mode_name(base)} {own:.3f} ms ({len(steps[base])}); {cells}")
    if result_dir:
        result.write(result_dir, (Path(result_dir) / "provenance.txt").read_text()
                     if (Path(result_dir) / "provenance.txt").exists() else None)


if __name__ == "__main__":
    main()
