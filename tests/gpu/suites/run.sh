#!/bin/sh
# Other projects' test suites natively and under streamsan (see run.py). From the repository
# root, with .device/ filled by tests/gpu/build-device.sh and .whl/ holding the filecheck wheel
# (and Warp's, when Warp is to run):   sh tests/gpu/suites/run.sh [SUITE...]
set -u
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
WHEELS=$(ls .whl/*.whl 2>/dev/null)
if [ -n "$WHEELS" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $WHEELS && export PYTHONPATH=/tmp/site
fi
python3 -c 'import numba, numba_cuda; print("numba", numba.__version__, "numba-cuda", numba_cuda.__version__)' 2>&1 | tail -1
python3 tests/gpu/suites/run.py "$PWD/.device/streamsan" "${OUT:-/tmp}" "$@"
