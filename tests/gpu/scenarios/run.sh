#!/bin/sh
# The scenario suite on the GPU machine (see run.py). From the repository root, with the
# release build of streamsan and its shim in .device/:   sh tests/gpu/scenarios/run.sh
set -u
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(SCENARIO_SUITES)=' | sort | tr '\n' ' ')sh tests/gpu/scenarios/run.sh $*}"
# A folder of this run's own for the programs and their reports: two runs side by side
# (tests/gpu/all.sh with WORK=) would otherwise stop each other's cases.
B=$(mktemp -d /tmp/streamsan-scenarios.XXXXXX)
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
nvcc -O2 -std=c++17 -o "$B/runtime_scenarios" tests/gpu/scenarios/runtime_scenarios.cu || exit 1
nvcc -O2 -std=c++17 --default-stream per-thread -o "$B/runtime_scenarios_ptds" tests/gpu/scenarios/runtime_scenarios.cu || exit 1
nvcc -O2 -std=c++17 -o "$B/ipc_scenarios" tests/gpu/scenarios/ipc_scenarios.cu || exit 1
cc -O1 -g -o "$B/semantics" tests/scenarios/semantics/*.c -L"$STUBS" -lcuda -lpthread -ldl || exit 1
# NCCL's scenarios need two GPUs and an NCCL: the one PyTorch's wheels install.
NCCL_LIB=$(python3 -c 'import glob, os, site; c = [p for d in site.getsitepackages() for p in glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True)]; print(c[0] if c else "")' 2>/dev/null)
if [ -n "$NCCL_LIB" ] && [ "$(nvidia-smi -L | grep -c '^GPU ')" -ge 2 ]; then
    NCCL_DIR=$(dirname "$NCCL_LIB")
    echo "NCCL: $NCCL_LIB"
    cc -O1 -g -o "$B/nccl" tests/scenarios/nccl.c -L"$STUBS" -lcuda -L"$NCCL_DIR" -l:libnccl.so.2 -Wl,-rpath,"$NCCL_DIR" -ldl || exit 1
    cc -O1 -g -DNCCL_DLOPEN -o "$B/nccl_dlopen" tests/scenarios/nccl.c -L"$STUBS" -lcuda -Wl,-rpath,"$NCCL_DIR" -ldl || exit 1
fi
python3 tests/gpu/scenarios/run.py "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}"
status=$?
# Kernel handles reused after cuModuleUnload (tests/kernels.rs on the stand-in): the race
# must name both kernels, whether or not this driver reuses the handle.
cc -O1 -g -o "$B/module_reload" tests/scenarios/module_reload.c -L"$STUBS" -lcuda || exit 1
python3 tests/gpu/scenarios/run.py --module-reload "$PWD/.device/streamsan" "$B" "${OUT:-/tmp}" || status=1
exit $status
