#!/bin/sh
# Sourced by the GPU runners: installs the wheels the GPU machine lacks into /tmp/site and
# puts it on PYTHONPATH. `.whl/` holds the small ones (filecheck for numba-cuda's tests,
# nvmath-python). Warp's wheel (118 MB once warp/bin/warp-clang.so and warp/examples/assets
# are dropped: CUDA kernels need neither) is over one call's carry, so it travels in three
# parts on consecutive calls while the machine stays warm: a call carrying `.warp1` or `.warp2`
# runs `sh tests/gpu/wheels.sh --stage`, which copies its part to /tmp; the call carrying
# `.warp3` joins the three and installs them. `.warp3/SHA256` checks the joined wheel.
if [ "${1:-}" = --stage ]; then
    for part in .warp1/warp.part00 .warp2/warp.part01; do
        [ -f "$part" ] && cp "$part" /tmp/ && echo "staged $part"
    done
    exit 0
fi
WHEELS=$(ls .whl/*.whl 2>/dev/null)
if [ -f .warp3/warp.part02 ] && [ -f /tmp/warp.part00 ] && [ -f /tmp/warp.part01 ]; then
    WARP=/tmp/warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl
    cat /tmp/warp.part00 /tmp/warp.part01 .warp3/warp.part02 > "$WARP"
    if [ "$(sha256sum "$WARP" | cut -d' ' -f1)" = "$(cut -d' ' -f1 .warp3/SHA256)" ]; then
        WHEELS="$WHEELS $WARP"
    else
        echo "warp wheel: parts do not join to .warp3/SHA256; Warp not installed"
    fi
fi
if [ -n "$WHEELS" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $WHEELS &&
        export PYTHONPATH=/tmp/site
fi
