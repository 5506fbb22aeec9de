#!/bin/sh
# The Python wheel checked as a user gets it (CI runs this): built unoptimized (quicker to make;
# the release wheel differs only in its build profile), installed into a fresh virtual
# environment with pytest and pytest-xdist, then tests/wheel/check.py against the stand-in
# driver. Needs python3 with venv and pip, and the package registry for maturin, pytest and
# pytest-xdist. Everything goes to target/wheel-check/.
set -eu
cd "$(dirname "$0")/../.."
work="$PWD/target/wheel-check"
rm -rf "$work"
mkdir -p "$work/driver"
python3 -m venv "$work/build"
"$work/build/bin/pip" install --quiet maturin
PATH="$work/build/bin:$PATH" scripts/wheel.sh dev "$work/dist"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$work"/dist/streamsan-*.whl pytest pytest-xdist
cargo build --quiet -p streamsan-standin
ln -s "$PWD/target/debug/libcuda_standin.so" "$work/driver/libcuda.so.1"
LD_LIBRARY_PATH="$work/driver" "$work/venv/bin/python" tests/wheel/check.py "$work/out"
