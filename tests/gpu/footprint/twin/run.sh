#!/bin/sh
# Builds twin_probe and runs its modes alternated (ROUNDS, 3), one JSON line each, into
# $OUT/twin.jsonl, and their result into $OUT/result-footprint-twin.json. On the GPU
# machine, from the repository root: sh tests/gpu/footprint/twin/run.sh
set -eu
export STREAMSAN_RESULT_VIA="ROUNDS=${ROUNDS:-3} sh tests/gpu/footprint/twin/run.sh"
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
san=$(dirname "$(find /usr/local/cuda*/ -name sanitizer_patching.h -path "*compute-sanitizer*" | head -1)")/..
san=$(cd "$san" && pwd)
work=$(mktemp -d)
nvcc -cubin -arch=sm_90 -o "$work/kernels.cubin" "$here/kernels.cu"
nvcc --fatbin --compile-as-tools-patch -gencode arch=compute_90,code=sm_90 -I"$san/include" -o "$work/patch.fatbin" "$here/patch.cu"
nvcc -O2 -I"$san/include" -o "$work/twin_probe" "$here/twin_probe.cpp" -lcuda -L"$san" -lsanitizer-public \
    -Xlinker -rpath -Xlinker "$san"
export CUDA_MODULE_LOADING=EAGER
: > "$out/twin.jsonl"
engine_patch="$here/../../../../shim/footprint/patch/footprint.fatbin streamsan_footprint_access"
probe_patch="$work/patch.fatbin count_access"
for round in $(seq "${ROUNDS:-3}"); do
    for run in "native $probe_patch" "twin $probe_patch" "twin $engine_patch" "twin+launch-domain $engine_patch"; do
        mode=${run%% *}
        patch=${run#* }
        "$work/twin_probe" "$mode" "$work/kernels.cubin" $patch | tee -a "$out/twin.jsonl" \
            || echo "{\"mode\": \"$mode\", \"round\": $round, \"exit\": $?}" | tee -a "$out/twin.jsonl"
    done
done
python3 "$here/summarize.py" "$out/twin.jsonl" "$out"
