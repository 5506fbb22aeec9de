#!/bin/sh
# Host races on the GPU machine (see run.py). From the repository root, with the
# release build of streamsan and its shim in .device/ (PyTorch and CuPy installed for their
# suites):   sh tests/gpu/host_races/run.sh
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(STREAMSAN_OPTIONS)=' | sort | tr '\n' ' ')sh tests/gpu/host_races/run.sh $*}"
# A folder of this run's own for the programs and their reports, as the scenario runner's.
B=$(mktemp -d /tmp/streamsan-host-races.XXXXXX)
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
nvcc -O2 -g -std=c++17 -o "$B/host_races" tests/gpu/host_races/host_races.cu || exit 1
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
cc -O1 -g -Itests/scenarios -o "$B/host_races_driver" tests/scenarios/host_races.c -L"$STUBS" -lcuda -lpthread -ldl || exit 1
python3 tests/gpu/host_races/run.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}"
