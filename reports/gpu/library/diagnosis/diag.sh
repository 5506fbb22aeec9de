#!/bin/sh
# Issue 17 item 3 diagnosis: the timm prefetcher under streamsan, with every launch's parameter words dumped.
set -u
D=.device/library
date -u; sha256sum $D/libstreamsan_shim.so $D/streamsan | tee $OUT/sha256.txt
export PYTHONUNBUFFERED=1
STREAMSAN_DEBUG_LAUNCHES=/tmp/launches timeout 400 $D/streamsan run --report $OUT/r.%p.json -- python3 $D/timm_prefetch.py 2>&1 | tail -40 | tee $OUT/stderr.txt
ls -la /tmp/launches* ; cat /tmp/launches.* | gzip -6 > $OUT/launches.txt.gz; ls -la $OUT
# Issue 17 items 1-2: the new driver-API scenarios, natively and under streamsan.
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
cc -O1 -g -o /tmp/semantics $D/scen/semantics.c -L"$STUBS" -lcuda -lpthread -ldl || exit 1
for sc in dtoh_async_to_pageable_memory freed_host_range htod_from_pageable_memory dtoh_joins_the_host async_copy_does_not_join_the_host; do for tw in racy fixed; do
  echo "== $sc $tw native: $(/tmp/semantics $sc $tw 2>&1; echo rc=$?)"
  $D/streamsan run --report /tmp/s.$sc.$tw.%p.json -- /tmp/semantics $sc $tw > /tmp/o.txt 2>&1; echo "   under streamsan rc=$?: $(tail -c 300 /tmp/o.txt)"
  python3 -c 'import json,sys,glob; [print("   races:", [(x["kind"], x.get("hazard"), x["first"]["api"], x["second"]["api"]) for x in json.load(open(f))["races"]]) for f in glob.glob(sys.argv[1])]' "/tmp/s.$sc.$tw.*.json"
done; done 2>&1 | tee $OUT/scenarios.txt
