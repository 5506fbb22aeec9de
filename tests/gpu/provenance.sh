#!/bin/sh
# What every GPU run logs first: the date, the machine, the build it runs (.device/BUILD, written
# by tests/gpu/build-device.sh) and the sha256 of the shim actually carried, which must match.
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "gpu: none seen"
if [ -f .device/BUILD ]; then sed 's/^/build: /' .device/BUILD; else echo "build: no .device/BUILD"; fi
echo "shim sha256 (as run): $(sha256sum .device/libstreamsan_shim.so 2>/dev/null | cut -d' ' -f1)"
