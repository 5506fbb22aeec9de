#!/bin/sh
# Other projects' own test suites under `pytest --streamsan`, from the Python wheel as a user
# installs it (see run.py). From the repository root on the GPU machine, with .pywheel/ carried
# (git-ignored; made on the development machine, docs/gpu-runs.md says how: the streamsan wheel,
# the wheels of pytest and pytest-xdist, BUILD naming the commit) and, for Warp, its parts staged
# by the calls before (tests/gpu/wheels.sh):
#   sh tests/gpu/pytest/run.sh [SUITE...]     SUITE: numba, warp, numba-xdist, warp-xdist
set -u
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-sh tests/gpu/pytest/run.sh $*}"
OUT="${OUT:-/tmp}"
sh tests/gpu/provenance.sh | tee "$OUT/provenance.txt"
cat .pywheel/BUILD 2>/dev/null
. tests/gpu/wheels.sh
# The wheel installed apart, with pytest and pytest-xdist where the machine lacks them: the
# command and its shim land in $SITE/bin.
SITE=/tmp/pytest-site
rm -rf "$SITE"
need="streamsan"
python3 -c 'import pytest' 2>/dev/null || need="$need pytest"
python3 -c 'import xdist' 2>/dev/null || need="$need pytest-xdist"
# shellcheck disable=SC2086
python3 -m pip install -q --no-index --find-links .pywheel --no-cache-dir --no-compile --target "$SITE" $need ||
    { echo "cannot install $need from .pywheel/"; exit 1; }
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import numba_cuda, pytest; print("numba-cuda", numba_cuda.__version__, "pytest", pytest.__version__)' 2>&1 | tail -1
python3 tests/gpu/pytest/run.py "$OUT" "$@"
