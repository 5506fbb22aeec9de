#!/bin/sh
# --backtrace-depth on the GPU: lifecycle.c's "deep" RAW (60 calls down) at the default
# depth, 50 and 64; prints each report's second call site: frames, and frames in deep().
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
cc -O1 -g -Wall -o /tmp/lifecycle tests/scenarios/lifecycle.c -L"$STUBS" -lcuda || exit 1
for d in default 50 64; do
  opt=""; [ $d = default ] || opt="--backtrace-depth $d"
  rm -f /tmp/deep.$d.*.json
  .device/streamsan run $opt --exitcode 0 --report /tmp/deep.$d.%p.json -- /tmp/lifecycle deep 2>&1 | tail -1
  python3 -c 'import json,glob,sys; r=json.load(open(glob.glob(sys.argv[1])[0])); s=r["races"][0]["second"]["site"]; print(sys.argv[2], "frames", len(s), "in deep()", sum(f.get("function")=="deep" for f in s), r["races"][0]["kind"])' "/tmp/deep.$d.*.json" $d
done
