#!/bin/sh
# Rebuilds footprint.fatbin from footprint.cu and records the source's sha256 beside it
# (footprint.fatbin.source-sha256), which a test compares with the source: a change to the
# patch without a rebuild fails CI. Needs a CUDA compiler (a toolkit's nvcc, or pip's
# nvidia-cuda-nvcc + nvidia-cuda-crt + nvidia-nvvm) and the Compute Sanitizer headers
# (a toolkit's compute-sanitizer/include, or pip's nvidia-cuda-sanitizer-api):
#
#   NVCC=/usr/local/cuda/bin/nvcc SANITIZER_INCLUDE=/usr/local/cuda/compute-sanitizer/include \
#     shim/footprint/patch/build.sh
#
# With pip's packages (nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime
# nvidia-cuda-sanitizer-api in a venv, C=<venv>/lib/python3.X/site-packages/nvidia/cu13):
#
#   NVCC=$C/bin/nvcc SANITIZER_INCLUDE=$C/compute-sanitizer/include CUDA_INCLUDE=$C/include \
#     shim/footprint/patch/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-nvcc}
include=${SANITIZER_INCLUDE:?set SANITIZER_INCLUDE to the folder holding sanitizer_patching.h}
# SASS for every architecture the Sanitizer API patches (Turing to Blackwell); no PTX, so
# that a driver older than the compiler never has to JIT it.
archs="75 80 86 89 90 100 120"
gencode=""
for a in $archs; do gencode="$gencode -gencode arch=compute_$a,code=sm_$a"; done
extra=""
[ -n "${CUDA_INCLUDE:-}" ] && extra="-I$CUDA_INCLUDE"
# shellcheck disable=SC2086
"$nvcc" --fatbin --compile-as-tools-patch -O3 -I"$include" $extra $gencode -o "$here/footprint.fatbin" "$here/footprint.cu"
sha256sum "$here/footprint.cu" | cut -d' ' -f1 > "$here/footprint.fatbin.source-sha256"
echo "built $here/footprint.fatbin ($(wc -c < "$here/footprint.fatbin") bytes) with $("$nvcc" --version | tail -1)"
