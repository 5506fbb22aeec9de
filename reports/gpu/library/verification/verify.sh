#!/bin/sh
# Issue 17 verification: the timm prefetcher (and its synchronize / no-autocast variants)
# natively and under streamsan; the new driver-API scenarios, racy and fixed.
set -u
D=.device/library
date -u; echo "commit: $(cat $D/COMMIT)"; sha256sum $D/libstreamsan_shim.so $D/streamsan | tee $OUT/sha256.txt
export PYTHONUNBUFFERED=1
echo "== timm_prefetch natively: $(python3 $D/timm_prefetch.py 2>&1 | tail -1)"
for v in timm_prefetch timm_prefetch_sync timm_prefetch_fp32; do
  echo "== $v under streamsan:"
  $D/streamsan run --report $OUT/$v.%p.json -- python3 $D/$v.py 2>&1 | grep -v "^    #" | tail -4
done 2>&1 | tee $OUT/timm.txt
STUBS="$(dirname "$(command -v nvcc)")/../lib64/stubs"
cc -O1 -g -o /tmp/semantics $D/scen/semantics.c -L"$STUBS" -lcuda -lpthread -ldl || exit 1
for sc in dtoh_async_to_pageable_memory freed_host_range stale_parameter_words capture_waits_on_a_later_event; do for tw in racy fixed; do
  echo "== $sc $tw native: $(/tmp/semantics $sc $tw 2>&1; echo rc=$?)"
  $D/streamsan run --report /tmp/s.$sc.$tw.%p.json -- /tmp/semantics $sc $tw > /tmp/o.txt 2>&1; echo "   under streamsan rc=$?: $(tail -n 2 /tmp/o.txt | tr '\n' ' ')"
  python3 -c 'import json,sys,glob; [print("   races:", [(x["kind"], x.get("hazard"), x["first"]["api"], x["second"]["api"]) for x in r["races"]], "notes:", [n["kind"] for n in r["notes"]]) for r in (json.load(open(f)) for f in glob.glob(sys.argv[1]))]' "/tmp/s.$sc.$tw.*.json"
done; done 2>&1 | tee $OUT/scenarios.txt
