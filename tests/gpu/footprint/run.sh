#!/bin/sh
# The footprint cases on the GPU machine (see run.py). From the repository root, with the
# release streamsan and its shim in .device/:   sh tests/gpu/footprint/run.sh [MODES]
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(STREAMSAN_OPTIONS)=' | sort | tr '\n' ' ')sh tests/gpu/footprint/run.sh $*}"
# A folder of this run's own for the cases, as the scenario runner's: two runs side by side
# would rebuild one program while the other runs it ("Text file busy").
B=$(mktemp -d /tmp/streamsan-footprint.XXXXXX)
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
nvcc -O2 -std=c++17 -arch=sm_90 -o "$B/cases" tests/gpu/footprint/cases.cu tests/gpu/footprint/stateful.cu || exit 1
python3 tests/gpu/footprint/run.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}" "$@"
