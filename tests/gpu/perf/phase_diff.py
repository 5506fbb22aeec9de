"""The steady state of a `--phase-times` table: the difference of two runs of one program
that differ only in their number of timed steps, per step. What happens once (a call
chain's first unwind, a kernel's first name lookup, module loading) is in both runs and
cancels; what every step does remains.

Usage: phase_diff.py SHORT.txt LONG.txt STEPS
  SHORT, LONG: the stderr of `streamsan run --phase-times` (both tables: the phases and the
  entry points); STEPS: how many more steps LONG timed. Prints, per row that grew, the calls
  and milliseconds a step, the nanoseconds per call of what was added, and those as a share
  of the driver's time a launch in the same process: the machine's speed moves every row
  from run to run (the driver's row with the others), so builds compare by the share."""
import re
import sys

ROW = re.compile(r"^\s+(\S.*?)\s+(\d+)\s+([\d.]+)\s+(\d+)$")


def rows(path):
    """Every row of both tables: label -> (calls, total ms)."""
    table = {}
    for line in open(path, errors="replace"):
        m = ROW.match(line.rstrip("\n"))
        if m:
            table[m.group(1).strip()] = (int(m.group(2)), float(m.group(3)))
    return table


# The phase table's row of the driver's own time in the launch entry points (its label in src/phases.rs).
DRIVER = "launches in the driver"

short, long_, steps = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3])
grown = []
for label, (calls, ms) in long_.items():
    calls0, ms0 = short.get(label, (0, 0.0))
    dcalls, dms = (calls - calls0) / steps, (ms - ms0) / steps
    if dcalls <= 0 and dms <= 0:
        continue
    grown.append((label, dcalls, dms, dms * 1e6 / dcalls if dcalls > 0 else float("nan")))
driver = next((each for label, _, _, each in grown if label == DRIVER), float("nan"))
print(f"{'row (per step, the difference of the two runs)':<48} {'calls':>9} {'ms':>9} {'ns each':>9} {'of driver':>9}")
for label, dcalls, dms, each in grown:
    print(f"{label:<48} {dcalls:>9.1f} {dms:>9.3f} {each:>9.0f} {each / driver:>9.3f}")
