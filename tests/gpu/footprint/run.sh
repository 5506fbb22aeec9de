#!/bin/sh
# The footprint cases on the GPU machine (see run.py). From the repository root, with the
# release streamsan and its shim in .device/footprint/:   sh tests/gpu/footprint/run.sh [MODES]
set -u
B=/tmp/streamsan-footprint
mkdir -p "$B"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -std=c++17 -arch=sm_90 -o "$B/cases" tests/gpu/footprint/cases.cu || exit 1
python3 tests/gpu/footprint/run.py "$PWD/.device/footprint/streamsan" "$B" "${OUT:-/tmp}" "$@"
