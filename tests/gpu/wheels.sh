#!/bin/sh
# Sourced by the GPU runners: installs the wheels the GPU machine lacks into /tmp/site and
# puts it on PYTHONPATH. `.whl/` holds the small ones (filecheck for numba-cuda's tests,
# nvmath-python). Warp's wheel is over one call's carry: stripped of warp/bin/warp-clang.so
# and warp/examples/assets (CUDA kernels need neither), zipped without compression and packed
# with `xz -9`, it travels in parts (`.warp1/warp.part00`, `.warp2/warp.part01`, ...), one
# per call back to back while the machine stays warm. Each call but the last runs
# `sh tests/gpu/wheels.sh --stage`, which copies its part to /tmp; the last part's folder
# also holds `SHA256` (of the whole .xz), and the call carrying it joins the parts, checks
# the sum, unpacks and installs the wheel.
if [ "${1:-}" = --stage ]; then
    for part in .warp*/warp.part*; do
        [ -f "$part" ] && cp "$part" /tmp/ && echo "staged $part"
    done
    exit 0
fi
# Installed once per set of wheels: a runner started beside others (tests/gpu/all.sh) finds
# them installed by the first, and neither joins the parts nor installs again.
SET="$(ls .whl/*.whl 2>/dev/null) $(cat .warp*/SHA256 2>/dev/null)"
install_wheels() {
    WHEELS=$(ls .whl/*.whl 2>/dev/null)
    SUM=$(ls .warp*/SHA256 2>/dev/null | head -1)
    if [ -n "$SUM" ]; then
        cp "$(dirname "$SUM")"/warp.part* /tmp/
        WARP=/tmp/warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl
        cat /tmp/warp.part* > "$WARP.xz"
        if [ "$(sha256sum "$WARP.xz" | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$SUM")" ] &&
            python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
                "$WARP.xz" "$WARP"; then
            WHEELS="$WHEELS $WARP"
        else
            echo "warp wheel: the parts in /tmp do not join to $SUM; Warp not installed"
            SET=$(ls .whl/*.whl 2>/dev/null)
        fi
    fi
    if [ -n "$WHEELS" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $WHEELS &&
            export PYTHONPATH=/tmp/site && echo "$SET" > /tmp/site/.installed
    fi
}
if [ -f /tmp/site/.installed ] && [ "$(cat /tmp/site/.installed)" = "$SET" ]; then
    export PYTHONPATH=/tmp/site
else
    install_wheels
fi
