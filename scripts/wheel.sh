#!/bin/sh
# Builds the Python wheel into target/wheels/: the `streamsan` command and its shim beside it
# (both installed into the environment's bin/: the command looks for the shim beside itself)
# and the pytest plugin (`pytest --streamsan`). Nothing is published.
#
# Needs cargo and maturin (`pip install maturin`). Usage, from anywhere:
#   scripts/wheel.sh                the release build, as users run it, into target/wheels/
#   scripts/wheel.sh dev DIR        the unoptimized build, quicker to make, into DIR (CI's check)
set -eu
profile="${1:-release}"
out="$(realpath -m "${2:-$(dirname "$0")/../target/wheels}")"
cd "$(dirname "$0")/.."
case "$profile" in
    dev) built=target/debug ;;
    *) built="target/$profile" ;;
esac
cargo build --quiet --profile "$profile" -p streamsan-shim
data=python/streamsan.data/scripts
rm -rf python/streamsan.data
mkdir -p "$data"
cp "$built/libstreamsan_shim.so" "$data/"
cd python
maturin build --quiet --profile "$profile" --out "$out"
