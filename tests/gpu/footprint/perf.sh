#!/bin/sh
# Steady-state cost of footprint=learn and exact on the GPU machine (perf.py; about three
# minutes of device time with the default plan). From the repository root, with the release
# streamsan and its shim in .device/footprint/, a Python with torch, transformers, torchvision
# and numba-cuda as PYTHON, and a toolkit's compute-sanitizer/ under CUDA_HOME:
#   PYTHON=/opt/torch/.venv/bin/python3 CUDA_HOME=/usr/local/cuda-13.0 OUT=$OUT \
#     sh tests/gpu/footprint/perf.sh [WORKLOAD:WARMUP:STEPS:MODES ...]
# Prints the date, the GPU and the shim's sha256 (for the report's table), then one JSON row
# per workload and mode (footprint-perf.json and .log in OUT).
set -u
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sha256sum .device/footprint/libstreamsan_shim.so
"${PYTHON:-python3}" tests/gpu/footprint/perf.py "$PWD/.device/footprint/streamsan" "${OUT:-/tmp}" "$@"
