#!/bin/sh
# Real programs on the GPU machine (see run.py). From the repository root, with
# .device/ holding the release streamsan, its shim and streamsan-cudarc-app, and the wheels
# of tests/gpu/wheels.sh (Warp's parts staged by the calls before):  sh tests/gpu/apps/run.sh
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(STREAMSAN_OPTIONS)=' | sort | tr '\n' ' ')sh tests/gpu/apps/run.sh $*}"
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
. tests/gpu/wheels.sh
python3 -c 'import torch, cupy, jax, numba; print("torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numba", numba.__version__)'
python3 -c 'import warp, nvmath; print("warp", warp.__version__, "nvmath", nvmath.__version__)' 2>&1 | tail -1
python3 tests/gpu/apps/run.py "$PWD/.device/streamsan" "$PWD/.device/streamsan-cudarc-app" "${OUT:-/tmp}" "$@"
