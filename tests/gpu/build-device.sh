#!/bin/sh
# Builds what the GPU machine runs and puts it in .device/ (git-ignored; carried by the device
# tool), with .device/BUILD naming the commit it was built from and each file's sha256, so that
# every GPU run can log which build it ran (tests/gpu/provenance.sh).
# Usage, from the repository root on the development machine:  sh tests/gpu/build-device.sh
set -eu
cargo build --release -p streamsan -p streamsan-shim -p streamsan-standin -p streamsan-bench -p streamsan-cudarc-app
mkdir -p .device
for f in streamsan libstreamsan_shim.so streamsan-bench libcuda_standin.so streamsan-cudarc-app; do
    cp "target/release/$f" .device/
done
# The shim with the `experiments` feature (parts a program can leave out while it runs:
# tests/gpu/perf/toggle.sh), built apart so that the shipped shim's bytes stay its own.
CARGO_TARGET_DIR=target/experiments cargo build --release -p streamsan-shim --features experiments
mkdir -p .device/experiments
cp target/experiments/release/libstreamsan_shim.so .device/experiments/
dirty=$(git status --porcelain --untracked-files=no | grep -q . && echo "+uncommitted changes" || true)
{
    echo "commit: $(git rev-parse HEAD)$dirty"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    (cd .device && sha256sum streamsan libstreamsan_shim.so streamsan-bench libcuda_standin.so streamsan-cudarc-app \
        experiments/libstreamsan_shim.so)
} > .device/BUILD
cat .device/BUILD
