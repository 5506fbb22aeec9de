#!/bin/sh
# Tries streamsan in one command, without a GPU: builds streamsan, its shim and the
# stand-in driver (tests/standin, a libcuda.so.1 for machines without a GPU), compiles a
# small CUDA driver-API program with two stream-ordering bugs (tests/scenarios/lifecycle.c),
# runs it under `streamsan run`, and reads its report back with `streamsan report`.
#
# Needs a Rust toolchain (cargo) and a C compiler (cc); no GPU, no CUDA toolkit.
# Usage: scripts/demo.sh        (from anywhere; everything goes to target/debug/demo)
set -eu
cd "$(dirname "$0")/.."
echo "== building streamsan, its shim and the stand-in driver (cargo build)"
cargo build --quiet
bin="$PWD/target/debug"
demo="$bin/demo"
mkdir -p "$demo/driver"
# The stand-in answers to the driver's names.
ln -sf "$bin/libcuda_standin.so" "$demo/driver/libcuda.so.1"
ln -sf "$bin/libcuda_standin.so" "$demo/driver/libcuda.so"
echo "== compiling a racy program: tests/scenarios/lifecycle.c"
cc -O1 -g -o "$demo/racy" tests/scenarios/lifecycle.c -L"$demo/driver" -lcuda
cd "$demo"
rm -f streamsan.*.json
echo "== streamsan run -- ./racy races"
status=0
LD_LIBRARY_PATH="$demo/driver" "$bin/streamsan" run -- ./racy races || status=$?
echo "== streamsan run exited $status (66: the program exited 0, but races were found)"
echo "== streamsan report --format text $(ls streamsan.*.json) | tail -1"
"$bin/streamsan" report --format text streamsan.*.json | tail -1 || true
echo "== the JSON reports are in $demo"
