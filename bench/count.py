#!/usr/bin/env python3
"""What the shim's launch path costs the program's thread, counted instead of timed.

The GPU machine cannot resolve a change of a few percent in a real program's step (its cores
run at two speeds, its processes differ from one to the next) and exposes no hardware
counters. So this counts under callgrind, per call of a bench workload, the instructions, the
level-1 data-cache misses (the `_cold_2m` workloads evict every level-1 and level-2 line
between calls, as a program's own work between launches does) and the simulated branch
mispredictions of each part of the launch path on the program's thread: counts repeat from
run to run, so two builds compare where timings cannot. It also gives the code the hook runs
at every launch (instructions, 64-byte lines, 4 KiB pages, by object file): a real program's
own code between launches evicts the instruction cache, which the workloads do not.

Callgrind runs the threads one at a time, so the shim's watcher rarely runs and the program's
thread settles the model's batch itself when the queue is full: that work is the watcher's
on a real machine and is not counted. Calls of the capture and the queue include the
memsets' (one call in eight of the training step).

Usage, from the repository root:  python3 bench/count.py [WORKLOAD]
(default training_step_cold_2m; any workload of bench/src/workloads.rs that launches with
cuLaunchKernelEx, or launch_python: bench/python_launch.py, whose launches read Python frames
too). Builds the bench with line tables into target/count/, writes callgrind's files into
target/count/callgrind/. The Python workload is this script's neighbour, whatever the folder
it is run from: run from another checkout, it counts that checkout's shim on the same work.
"""
import os
import shutil
import subprocess
import sys

TARGET = "target/count"
PROFILE = os.path.join(TARGET, "release")
SHIM = "libstreamsan_shim.so"
UNWINDER = "libgcc_s.so.1"

# The parts of the launch path, each the inclusive cost of one function, of the shim unless
# said. The unwinds are a chain's first capture only (the bench's 256 chains, in its warm-up
# mostly): per call of the unwinder, and in the capture's figure, which is per capture.
PARTS = [
    ("call-site capture", SHIM, "streamsan_shim::sites::stack::capture"),
    ("  of which Python frames", SHIM, "streamsan_shim::sites::python::walk"),
    ("  of which unwinds (a chain's first capture)", UNWINDER, "_Unwind_Backtrace"),
    ("kernel lookup", SHIM, "streamsan_shim::hooks::kernels::Recent::info"),
    ("parameter scan", SHIM, "streamsan_shim::hooks::kernels::accesses"),
    ("queued in the batch", SHIM, "streamsan_shim::hooks::batch::queue_work"),
]
EXPORT = "cuLaunchKernelEx"
# The bench's workload in Python: its launches are cuLaunchKernel's, counted from the hook's
# function (callgrind names the shim's export by another symbol at its address); the
# stand-in's cuLaunchKernel, the driver's call inside it, is left out as the export's is.
PYTHON_WORKLOAD = "launch_python"
PYTHON_HOOK = "streamsan_shim::hooks::launches::launch_kernel"
PYTHON_LAUNCHES = 20_000
# The workloads' other hooked call, between launches.
MEMSET = "cuMemsetD8Async"
SETTLE = "streamsan_shim::hooks::batch::settle"
EVENTS = ["Ir", "D1mr", "D1mw", "Bcm"]


def build(workload):
    """The shim, the stand-ins and the bench with line tables, set up as the bench sets itself
    up (`cargo run`: built beside it, the stand-ins linked into `bench-driver/`), by running
    `workload` once natively and preloaded; the folder of the stand-in driver."""
    env = dict(os.environ, CARGO_PROFILE_RELEASE_DEBUG="line-tables-only")
    subprocess.run(["cargo", "run", "--release", "--quiet", "--target-dir", TARGET, "-p", "streamsan-bench", "--",
                    "--repeat", "1", "--only", workload, "--out", os.path.join(TARGET, "streamsan-bench.json")],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(PROFILE, "bench-driver")


def run(workload, drivers):
    out = os.path.join(TARGET, "callgrind")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(drivers),
               LD_PRELOAD=os.path.abspath(os.path.join(PROFILE, SHIM)),
               STREAMSAN_OPTIONS="log_path=/tmp/streamsan-count.%p.json")
    # Counted only inside the shim's hooks: entering a listed function switches counting on or
    # off, leaving it switches back, so the driver's own calls (the stand-in's functions of
    # the same names, nested in the hooks) and the batch's settles are not counted.
    if workload == PYTHON_WORKLOAD:
        toggled = (PYTHON_HOOK, "cuLaunchKernel", SETTLE)
        # This interpreter's own binary: valgrind follows no launcher script (pyenv's shims).
        program = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_launch.py")]
        env["PYTHON_LAUNCHES"] = str(PYTHON_LAUNCHES)
    else:
        toggled = (EXPORT, MEMSET, SETTLE)
        program = [os.path.join(PROFILE, "streamsan-bench"), "--child", workload]
    toggles = [f"--toggle-collect={f}" for f in toggled]
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", "--cache-sim=yes",
                    "--branch-sim=yes", "--D1=49152,12,64", "--LL=33554432,16,64", "--collect-atstart=no",
                    "--dump-instr=yes", *toggles,
                    f"--callgrind-out-file={out}/callgrind.%p", *program],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The thread that ran main: the first of the process's files.
    main = sorted(f for f in os.listdir(out) if f.endswith("-01"))
    return os.path.join(out, main[0])


class Profile:
    """Callgrind's file of one thread, read: each function's own counts, the counts of the
    calls it makes (their callees' inclusive counts), how often others called it, by (object
    file, function), and each instruction's own count of executions, by (object file,
    address). Callgrind gives names once with a number, then the number alone, a function's
    lines from inlined code under the same function, and each cost line's positions (an
    instruction's address, its source line) in full, relative to the line before (`+n`,
    `-n`) or the same (`*`)."""

    def __init__(self, path):
        self.own, self.callees, self.calls, self.executed = {}, {}, {}, {}
        names, objects = {}, {}

        def name(table, value):
            number, _, text = value.partition(" ")
            if text:
                table[number] = text
            return table.get(number, number)

        def position(token, before):
            if token == "*":
                return before
            if token[0] in "+-":
                return before + int(token)
            return int(token, 0)

        events, positions, obj, function, callee, callee_object, call = [], [], None, None, None, None, False
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("events:"):
                    events = line.split()[1:]
                    continue
                if line.startswith("positions:"):
                    positions = [0] * len(line.split()[1:])
                    continue
                if line and (line[0].isdigit() or line[0] in "+-*"):
                    fields = line.split()
                    # A line may leave out trailing positions that did not change, as its
                    # trailing counts that are zero.
                    given = fields[:len(positions)]
                    positions = [position(t, p) for t, p in zip(given, positions)] + positions[len(given):]
                    counts = dict(zip(events, map(int, fields[len(positions):])))
                    table = self.callees if call else self.own
                    row = table.setdefault((obj, function), [0] * len(EVENTS))
                    for i, event in enumerate(EVENTS):
                        row[i] += counts.get(event, 0)
                    if not call:
                        at = (obj, positions[0])
                        self.executed[at] = self.executed.get(at, 0) + counts.get("Ir", 0)
                    call = False
                    continue
                key, _, value = line.partition("=")
                if key == "ob":
                    obj = os.path.basename(name(objects, value))
                elif key == "fn":
                    function = name(names, value)
                elif key == "cob":
                    callee_object = os.path.basename(name(objects, value))
                elif key == "cfn":
                    callee = name(names, value)
                elif key == "calls":
                    target = (callee_object or obj, callee)
                    if target != (obj, function):
                        self.calls[target] = self.calls.get(target, 0) + int(value.split()[0])
                    callee_object, call = None, True

    def code_touched(self, calls):
        """By object file, the instructions, 64-byte lines and 4 KiB pages of code that nearly
        every one of `calls` calls runs (executed at least 0.9 times a call): the code a call
        brings back into the caches and the instruction TLB when the program's own work
        between calls evicted it. A loop that a few calls run many times passes too: the
        unwinder's rows on the bench are its few unwinds of deep chains, not every launch's."""
        touched = {}
        for (obj, address), executed in self.executed.items():
            if executed >= 0.9 * calls:
                instructions, lines, pages = touched.setdefault(obj, (set(), set(), set()))
                instructions.add(address)
                lines.add(address // 64)
                pages.add(address // 4096)
        return {obj: tuple(len(s) for s in sets) for obj, sets in touched.items()}

    def inclusive(self, obj, function):
        own = self.own.get((obj, function), [0] * len(EVENTS))
        return [a + b for a, b in zip(own, self.callees.get((obj, function), [0] * len(EVENTS)))]


def main():
    workload = sys.argv[1] if len(sys.argv) > 1 else "training_step_cold_2m"
    if shutil.which("valgrind") is None:
        sys.exit("count.py: needs valgrind (its callgrind tool) on the PATH")
    # The Python workload is built for (the stand-ins, the shim) with a short bench workload.
    profile = Profile(run(workload, build("launch_1t" if workload == PYTHON_WORKLOAD else workload)))
    hook = PYTHON_HOOK if workload == PYTHON_WORKLOAD else EXPORT
    n = profile.calls.get((SHIM, hook), 0)
    if n == 0:
        sys.exit(f"count.py: no call of the shim's {hook} in the program's thread")
    table = [("the launch's hook, the driver's call left out", SHIM, hook)] + PARTS
    print(f"{workload}: on the program's thread, per call (callgrind; the driver's calls and "
          f"the batch's settles, the watcher's work, not counted)")
    print(f"  {'part':<46} {'calls':>7} {'instructions':>12} {'L1d read misses':>16} {'L1d write misses':>17} {'mispredicted':>13}")
    for label, obj, function in table:
        calls = profile.calls.get((obj, function), 0)
        counts = profile.inclusive(obj, function)
        figures = " ".join(f"{c / calls:>{w}.1f}" for c, w in zip(counts, [12, 16, 17, 13])) if calls else ""
        print(f"  {label:<46} {calls:>7} {figures}")
    print("  code the hook runs at every launch (the driver's call left out), by object file:")
    print(f"  {'object':<46} {'instructions':>12} {'64-byte lines':>14} {'4 KiB pages':>12}")
    for obj, (instructions, lines, pages) in sorted(profile.code_touched(n).items(), key=lambda kv: -kv[1][1]):
        print(f"  {obj:<46} {instructions:>12} {lines:>14} {pages:>12}")


if __name__ == "__main__":
    main()
