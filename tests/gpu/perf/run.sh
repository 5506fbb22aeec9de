#!/bin/sh
# Overhead on the GPU machine. From the repository root, with .device/ filled by
# tests/gpu/build-device.sh:   sh tests/gpu/perf/run.sh [PROGRAM...]
# (run.py's environment variables choose rounds, steps, slow tools and more streamsan modes).
# 1. streamsan-bench against the stand-in on this machine's cores (no GPU used), unless
#    PERF_BENCH=0;
# 2. run.py: the real programs natively, under streamsan, memcheck and TORCH_CUDA_SANITIZER.
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(PERF_[A-Z_]*)=' | sort | tr '\n' ' ')sh tests/gpu/perf/run.sh $*}"
OUT="${OUT:-/tmp}"
sh tests/gpu/provenance.sh | tee "$OUT/provenance.txt"
lscpu | grep -i "model name" | head -1
nproc
if [ "${PERF_BENCH:-1}" = 1 ]; then
    mkdir -p /tmp/standin-driver && ln -sf "$PWD/.device/libcuda_standin.so" /tmp/standin-driver/libcuda.so.1
    .device/streamsan-bench --shim "$PWD/.device/libstreamsan_shim.so" --driver /tmp/standin-driver --out "$OUT/streamsan-bench.json"
fi
compute-sanitizer --version | tail -1
python3 -c 'import torch, transformers, timm, torchvision, torch_geometric; print("torch", torch.__version__, "transformers", transformers.__version__, "timm", timm.__version__, "torchvision", torchvision.__version__, "torch_geometric", torch_geometric.__version__)'
python3 tests/gpu/perf/run.py "$PWD/.device/streamsan" "$OUT" "$@"
