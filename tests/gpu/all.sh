#!/bin/sh
# The correctness runners side by side, in one call of the device tool: they check what is
# reported, not how fast, so they may share the GPU and the machine's cores. The timing
# runners (perf/, footprint/perf.sh) and other projects' suites (whose tests may read the
# device's free memory) run alone. From the repository root, with .device/ filled by
# tests/gpu/build-device.sh:
#   sh tests/gpu/all.sh [RUNNER...]      (default: scenarios host_races footprint apps)
# Each runner's output goes to its own folder, then all of it into $OUT/all.tgz, and each
# runner's result (result-SUITE.json, tests/gpu/result.py) into $OUT beside it; the last
# lines of each runner's output are printed. ALL_TIMEOUT=SECONDS stops each runner after
# that long, so that what ran is still packed within a call's limit (a call that runs out
# before packing returns nothing). WORK=FOLDER (/tmp/gpu-all) lets two run side by side,
# say one with STREAMSAN_OPTIONS=host_races=1 and STREAMSAN_RESULT_VARIANT=host-races-on
# (so that its results keep names of their own).
set -u
OUT="${OUT:-/tmp}"
WORK="${WORK:-/tmp/gpu-all}"
rm -rf "$WORK" && mkdir -p "$WORK"
# The wheels are installed once, before the runners (each would install them again).
. tests/gpu/wheels.sh
# What each result names as its command: this one.
export STREAMSAN_RESULT_VIA="${ALL_TIMEOUT:+ALL_TIMEOUT=$ALL_TIMEOUT }sh tests/gpu/all.sh ${*:-scenarios host_races footprint apps}"
for runner in ${*:-scenarios host_races footprint apps}; do
    mkdir -p "$WORK/$runner"
    (OUT="$WORK/$runner" PYTHONUNBUFFERED=1 ${ALL_TIMEOUT:+timeout -k 5 "$ALL_TIMEOUT"} \
         sh "tests/gpu/$runner/run.sh" > "$WORK/$runner/run.txt" 2>&1
     echo "exit $?" >> "$WORK/$runner/run.txt") &
done
wait
for runner in ${*:-scenarios host_races footprint apps}; do
    echo "== $runner"
    tail -n 4 "$WORK/$runner/run.txt"
done
tar czf "$OUT/all.tgz" -C "$WORK" .
cp "$WORK"/*/result-*.json "$OUT"/ 2>/dev/null || echo "no result written (a runner stopped before its end)"
