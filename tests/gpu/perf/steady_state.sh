#!/bin/sh
# The launch path's steady state on the GPU machine: each program of programs.py under
# `streamsan run --phase-times` with SHORT and LONG timed steps, and natively with the same
# steps beside them; `phase_diff.py` takes the difference per step (what every step costs,
# one-time work cancelled). From the repository root, with .device/ filled by
# tests/gpu/build-device.sh:   sh tests/gpu/perf/steady_state.sh SHORT LONG PROGRAM...
# BUILDS: the streamsan builds to run, alternated, "NAME=BINARY[@FOOTPRINT] ..." (default
# "default=.device/streamsan"; @FOOTPRINT runs it with --footprint FOOTPRINT, e.g.
# "params=.device/streamsan@params learn=.device/streamsan@learn"); NATIVE=0 runs no native
# process.
# Writes $OUT/steady/{NAME,native}-PROGRAM-STEPS.txt and the differences,
# $OUT/steady/diff-NAME-PROGRAM.txt.
set -u
SHORT=$1 LONG=$2
shift 2
PY=${PYTHON:-python3}
BUILDS=${BUILDS:-default=.device/streamsan}
o=${OUT:-/tmp}/steady
mkdir -p "$o"
sh tests/gpu/provenance.sh > "$o/provenance.txt"
binary() { b=${1#*=}; echo "${b%@*}"; }
footprint() { case $1 in *@*) echo "--footprint ${1##*@}" ;; esac; }
for build in $BUILDS; do
    echo "$build: $(sha256sum "$(dirname "$(binary "$build")")/libstreamsan_shim.so" | cut -d' ' -f1)" >> "$o/provenance.txt"
done
for n in "$SHORT" "$LONG"; do
    for p in "$@"; do
        for build in $BUILDS; do
            "$(binary "$build")" run --phase-times $(footprint "$build") --exitcode 0 --report "/tmp/steady.%p.json" -- \
                $PY tests/gpu/perf/programs.py "$p" "$n" 5 > "$o/${build%%=*}-$p-$n.txt" 2>&1
        done
        [ "${NATIVE:-1}" = 0 ] || $PY tests/gpu/perf/programs.py "$p" "$n" 5 > "$o/native-$p-$n.txt" 2>&1
    done
done
for p in "$@"; do
    for build in $BUILDS; do
        name=${build%%=*}
        $PY tests/gpu/perf/phase_diff.py "$o/$name-$p-$SHORT.txt" "$o/$name-$p-$LONG.txt" $((LONG - SHORT)) > "$o/diff-$name-$p.txt"
    done
done
