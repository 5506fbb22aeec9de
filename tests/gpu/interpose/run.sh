#!/bin/sh
# Interception proof on the GPU machine (see prove.py). Run from the repository root with
# the release build of streamsan and its shim in .device/:
#   sh tests/gpu/interpose/run.sh [ROUNDS]
set -u
B=/tmp/streamsan-build
mkdir -p "$B"
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
nvcc --version | tail -2
python3 -c 'import torch, cupy, jax; print("torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__)'
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
nvcc -O2 -o "$B/runtime_streams" tests/gpu/interpose/runtime_streams.cu || exit 1
nvcc -O2 --default-stream per-thread -o "$B/runtime_streams_ptds" tests/gpu/interpose/runtime_streams.cu || exit 1
cc -O2 -o "$B/road_linked" tests/scenarios/road_linked.c -L"$STUBS" -lcuda || exit 1
python3 tests/gpu/interpose/prove.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}" "${1:-50}"
