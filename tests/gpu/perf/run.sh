#!/bin/sh
# Overhead on the GPU machine. From the repository root, with .device/ holding the release
# streamsan, its shim, streamsan-bench and the stand-in (libcuda_standin.so):
#   sh tests/gpu/perf/run.sh       (STREAMSAN_PERF_CPUS=4-7 pins the PyTorch runs to cores 4-7)
# 1. streamsan-bench against the stand-in on this machine's cores (no GPU used);
# 2. run.py: PyTorch workloads natively, under streamsan, memcheck and TORCH_CUDA_SANITIZER.
set -u
OUT="${OUT:-/tmp}"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -i "model name" | head -1
nproc
mkdir -p /tmp/standin-driver && ln -sf "$PWD/.device/libcuda_standin.so" /tmp/standin-driver/libcuda.so.1
.device/streamsan-bench --shim "$PWD/.device/libstreamsan_shim.so" --driver /tmp/standin-driver --out "$OUT/streamsan-bench.json"
compute-sanitizer --version | tail -1
python3 -c 'import torch; print("torch", torch.__version__)'
python3 tests/gpu/perf/run.py "$PWD/.device/streamsan" "$OUT"
