#!/bin/sh
# The footprint cases on the GPU machine (see run.py). From the repository root, with the
# release streamsan and its shim in .device/:   sh tests/gpu/footprint/run.sh [MODES]
set -u
B=/tmp/streamsan-footprint
mkdir -p "$B"
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
nvcc -O2 -std=c++17 -arch=sm_90 -o "$B/cases" tests/gpu/footprint/cases.cu || exit 1
python3 tests/gpu/footprint/run.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}" "$@"
