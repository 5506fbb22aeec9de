#!/bin/sh
# Is footprint=learn's slower driver launch the Compute Sanitizer API's launch callback?
# The empty-kernel loop of ../host-time under --phase-times with footprint=params, learn,
# and learn with the API's launch callbacks never enabled (a diagnostic shim in .diag/:
# diag-shim.patch; the loop's kernel has no memory instruction, so nothing patched runs),
# alternated, two rounds. Output under $OUT/lc.
set -u
export CUDA_HOME=${CUDA_HOME:-$(ls -d /usr/local/cuda-13* | head -1)}
o=$OUT/lc; mkdir -p $o
{ sh tests/gpu/provenance.sh; cat .diag/BUILD; } > $o/provenance.txt
cc -O2 reports/gpu/host-time/launch_loop.c -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/launch_loop || exit 1
for r in 1 2; do
  .diag/streamsan run --footprint params --phase-times --exitcode 0 --report /tmp/lc.%p.json -- /tmp/launch_loop 100000 3 > $o/params-$r.txt 2>&1
  STREAMSAN_FOOTPRINT_TRACE=counters .diag/streamsan run --footprint learn --phase-times --exitcode 0 --report /tmp/lc.%p.json -- /tmp/launch_loop 100000 3 > $o/learn-$r.txt 2>&1
  STREAMSAN_DIAG_NO_LAUNCH_CB=1 STREAMSAN_FOOTPRINT_TRACE=counters .diag/streamsan run --footprint learn --phase-times --exitcode 0 --report /tmp/lc.%p.json -- /tmp/launch_loop 100000 3 > $o/learn-no-callback-$r.txt 2>&1
done
