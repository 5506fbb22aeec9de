#!/bin/sh
# Other projects' test suites natively and under streamsan (see run.py). From the repository
# root, with .device/ filled by tests/gpu/build-device.sh and the wheels of tests/gpu/wheels.sh
# (filecheck; Warp's parts staged by the calls before, when Warp is to run):
#   sh tests/gpu/suites/run.sh [SUITE...]
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(SUITES?)=' | sort | tr '\n' ' ')sh tests/gpu/suites/run.sh $*}"
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
. tests/gpu/wheels.sh
python3 -c 'import numba, numba_cuda; print("numba", numba.__version__, "numba-cuda", numba_cuda.__version__)' 2>&1 | tail -1
python3 tests/gpu/suites/run.py "$PWD/.device/streamsan" "${OUT:-/tmp}" "$@"
