#!/bin/sh
# The launch path's steady state on the GPU machine: each program of programs.py under
# `streamsan run --phase-times` with SHORT and LONG timed steps, and natively with the same
# steps beside them; `phase_diff.py` takes the difference per step (what every step costs,
# one-time work cancelled). From the repository root, with .device/ filled by
# tests/gpu/build-device.sh:   sh tests/gpu/perf/steady_state.sh SHORT LONG PROGRAM...
# Writes $OUT/steady/{params,native}-PROGRAM-STEPS.txt and the differences,
# $OUT/steady/diff-PROGRAM.txt.
set -u
SHORT=$1 LONG=$2
shift 2
PY=${PYTHON:-python3}
o=${OUT:-/tmp}/steady
mkdir -p "$o"
sh tests/gpu/provenance.sh > "$o/provenance.txt"
for n in "$SHORT" "$LONG"; do
    for p in "$@"; do
        .device/streamsan run --phase-times --exitcode 0 --report "/tmp/steady.%p.json" -- \
            $PY tests/gpu/perf/programs.py "$p" "$n" 5 > "$o/params-$p-$n.txt" 2>&1
        $PY tests/gpu/perf/programs.py "$p" "$n" 5 > "$o/native-$p-$n.txt" 2>&1
    done
done
for p in "$@"; do
    $PY tests/gpu/perf/phase_diff.py "$o/params-$p-$SHORT.txt" "$o/params-$p-$LONG.txt" $((LONG - SHORT)) > "$o/diff-$p.txt"
done
