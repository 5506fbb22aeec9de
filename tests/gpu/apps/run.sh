#!/bin/sh
# Real programs on the GPU machine (see run.py). From the repository root, with
# .device/ holding the release streamsan, its shim and streamsan-cudarc-app, .whl/ the
# nvmath-python wheel and the Warp wheel's parts in /tmp/warp.part00, /tmp/warp.part01 and
# .warp3/warp.part02 (carried on consecutive calls):  sh tests/gpu/apps/run.sh
set -u
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
WHEELS=$(ls .whl/*.whl 2>/dev/null)
if [ -f .warp3/warp.part02 ] && [ -f /tmp/warp.part00 ] && [ -f /tmp/warp.part01 ]; then
    cat /tmp/warp.part00 /tmp/warp.part01 .warp3/warp.part02 > /tmp/warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl
    WHEELS="$WHEELS /tmp/warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl"
fi
if [ -n "$WHEELS" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $WHEELS && export PYTHONPATH=/tmp/site
fi
python3 -c 'import torch, cupy, jax, numba; print("torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__, "numba", numba.__version__)'
python3 -c 'import warp, nvmath; print("warp", warp.__version__, "nvmath", nvmath.__version__)' 2>&1 | tail -1
python3 tests/gpu/apps/run.py "$PWD/.device/streamsan" "$PWD/.device/streamsan-cudarc-app" "${OUT:-/tmp}" "$@"
