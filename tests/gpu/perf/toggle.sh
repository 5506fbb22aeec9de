#!/bin/sh
# What parts of the shim cost a real program, measured inside one process: programs.py under
# the `experiments` shim (.device/experiments/, built by tests/gpu/build-device.sh) leaves
# parts out step by step (STREAMSAN_TOGGLE: the modes, each a bit set of
# shim/src/intercept/experiments.rs), with native processes alternated beside them; then
# toggle.py compares the modes. From the repository root on the GPU machine:
#   sh tests/gpu/perf/toggle.sh PROGRAM STEPS ROUNDS [MODES]     (MODES default 0,1,14,16)
# Writes $OUT/toggle/{native,toggled}-PROGRAM-ROUND.txt, provenance.txt and summary.txt (and,
# with mode 16 among MODES, against-forward-all.txt and result-toggle.json).
set -u
PROGRAM=$1 STEPS=$2 ROUNDS=$3 MODES=${4:-0,1,14,16}
o=${OUT:-/tmp}/toggle
mkdir -p "$o"
sh tests/gpu/provenance.sh > "$o/provenance.txt"
echo "experiments shim sha256 (as run): $(sha256sum .device/experiments/libstreamsan_shim.so | cut -d' ' -f1)" \
    >> "$o/provenance.txt"
for r in $(seq "$ROUNDS"); do
    python3 tests/gpu/perf/programs.py "$PROGRAM" "$STEPS" 5 > "$o/native-$PROGRAM-$r.txt" 2>&1
    STREAMSAN_SHIM="$PWD/.device/experiments/libstreamsan_shim.so" STREAMSAN_TOGGLE="$MODES" \
        .device/streamsan run --exitcode 0 --report "/tmp/toggle.%p.json" -- \
        python3 tests/gpu/perf/programs.py "$PROGRAM" "$STEPS" 5 > "$o/toggled-$PROGRAM-$r.txt" 2>&1
done
python3 tests/gpu/perf/toggle.py "$o"/native-*.txt "$o"/toggled-*.txt | tee "$o/summary.txt"
# With every hook forwarded among the modes: each mode against it too (the whole shim's work),
# and the result (result-toggle.json: the whole shim against every hook forwarded).
case ",$MODES," in *,16,*)
    STREAMSAN_RESULT_VIA="sh tests/gpu/perf/toggle.sh $*" python3 tests/gpu/perf/toggle.py --result "$o" \
        --against FORWARD_ALL "$o"/native-*.txt "$o"/toggled-*.txt > "$o/against-forward-all.txt" ;;
esac
