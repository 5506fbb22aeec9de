#!/bin/sh
# CuSan's runtime tests under streamsan (see run.py). From the repository root on the GPU
# machine, with the release build of streamsan and its shim in .device/ and CuSan's
# test/runtime/ files in .cusan/ (git-ignored; this runner fetches nothing):
#   sh tests/gpu/cusan/run.sh
# CUSAN_ARCH (native) is nvcc's -arch, CUSAN_JOBS (4) how many variants build and run at once.
set -u
# The CuSan commit whose tests EXPECTED in run.py was written from (tudasc/cusan, 2025-04-21).
CUSAN_COMMIT=2e2a503cb65c1fc9fcf61816aac6a55e1d854dc1
# The command a result names (tests/gpu/result.py): this one, with the knobs set, unless
# a runner above it (all.sh) named its own.
export STREAMSAN_RESULT_VIA="${STREAMSAN_RESULT_VIA:-$(env | grep -E '^(STREAMSAN_OPTIONS|CUSAN_ARCH|CUSAN_JOBS)=' | sort | tr '\n' ' ')sh tests/gpu/cusan/run.sh $*}"
if [ ! -f .cusan/02_event.c ]; then
    cat >&2 <<END
.cusan/ holds no CuSan runtime tests. CuSan's sources stay CuSan's (BSD-3-Clause): they are
not in this repository. On the development machine, from the repository root:
  git clone https://github.com/tudasc/cusan /tmp/cusan-src
  git -C /tmp/cusan-src checkout $CUSAN_COMMIT
  mkdir -p .cusan && cp /tmp/cusan-src/test/runtime/*.c /tmp/cusan-src/LICENSE .cusan/
  echo $CUSAN_COMMIT > .cusan/COMMIT
then carry .cusan beside .device.
END
    exit 2
fi
B=$(mktemp -d /tmp/streamsan-cusan.XXXXXX)
sh tests/gpu/provenance.sh | tee "${OUT:-/tmp}/provenance.txt"
echo "cusan commit: $(cat .cusan/COMMIT 2>/dev/null || echo unknown)"
if [ "$(cat .cusan/COMMIT 2>/dev/null)" != "$CUSAN_COMMIT" ]; then
    echo "warning: .cusan/ is not from CuSan $CUSAN_COMMIT, which run.py's expectations were written from" >&2
fi
python3 tests/gpu/cusan/run.py "$PWD/.device/streamsan" "$PWD/.cusan" "$B" "${OUT:-/tmp}"
