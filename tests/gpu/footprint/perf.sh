#!/bin/sh
# Steady-state cost of footprint=learn and exact on the GPU machine (perf.py; about three
# minutes of device time with the default plan). From the repository root, with the release
# streamsan and its shim in .device/, a Python with torch, transformers, torchvision
# and numba-cuda as PYTHON, and a toolkit's compute-sanitizer/ under CUDA_HOME:
#   PYTHON=/opt/torch/.venv/bin/python3 CUDA_HOME=/usr/local/cuda-13.0 OUT=$OUT \
#     sh tests/gpu/footprint/perf.sh [WORKLOAD:WARMUP:STEPS:MODES ...]
# Logs the build first (provenance.sh), then one JSON row
# per workload and mode (footprint-perf.json and .log in OUT). FOOTPRINT_ROUNDS=N runs the
# plan N times in turn and adds a summary over the rounds (perf.py).
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(FOOTPRINT_ROUNDS|PYTHON)=' | sort | tr '\n' ' ')sh tests/gpu/footprint/perf.sh $*}"
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
"${PYTHON:-python3}" tests/gpu/footprint/perf.py "$PWD/.device/streamsan" "${OUT:-/tmp}" "$@"
