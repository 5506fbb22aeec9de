#!/bin/sh
# The scenario suite on the GPU machine (see run.py). From the repository root, with the
# release build of streamsan and its shim in .device/:   sh tests/gpu/scenarios/run.sh
set -u
B=/tmp/streamsan-scenarios
mkdir -p "$B"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
nvcc -O2 -std=c++17 -o "$B/runtime_scenarios" tests/gpu/scenarios/runtime_scenarios.cu || exit 1
nvcc -O2 -std=c++17 --default-stream per-thread -o "$B/runtime_scenarios_ptds" tests/gpu/scenarios/runtime_scenarios.cu || exit 1
cc -O1 -g -o "$B/semantics" tests/scenarios/semantics.c -L"$STUBS" -lcuda -lpthread -ldl || exit 1
python3 tests/gpu/scenarios/run.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}"
