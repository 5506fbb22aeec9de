# NVIDIA Warp on two GPUs: the documentation's peer-copy and multi-GPU capture scenarios
# ("Concurrency": "Array Copying", "Explicit Streams Arguments", "Synchronization and Graph
# Capture"). Needs two CUDA devices.
# Clean: the peer copy on the source device's stream after stream0.wait_stream(stream1); the
# default-rules copy after synchronize_device on the source device; a graph captured over a
# stream on each device, forked and joined with wait_stream, launched three times.
# Racy: the explicit-stream peer copy without stream0.wait_stream(stream1) (the destination
# is allocated on cuda:1's stream: use-before-alloc); the default-rules copy without
# synchronize_device("cuda:0") (the copy runs on cuda:1's stream while cuda:0's stream may
# still be allocating and filling the source: use-before-alloc, and a cross-stream race with
# the fill).
# Usage: warp_multi_gpu.py clean|peer_copy_without_wait|copy_without_source_sync
import sys

import numpy as np
import warp as wp

mode = sys.argv[1]
wp.config.quiet = True
wp.init()
if wp.get_cuda_device_count() < 2:
    sys.exit("warp_multi_gpu: needs two CUDA devices")


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), factor: float):
    i = wp.tid()
    y[i] = factor * x[i]


n = 1 << 16

if mode == "peer_copy_without_wait":
    stream0, stream1 = wp.get_stream("cuda:0"), wp.get_stream("cuda:1")
    a0 = wp.full(n, 2.0, dtype=float, device="cuda:0")
    a1 = wp.empty(n, dtype=float, device="cuda:1")      # allocated on stream1
    wp.copy(a1, a0, stream=stream0)                     # no stream0.wait_stream(stream1)
    wp.synchronize()
    print("warp_multi_gpu:", mode, "done")
    sys.exit(0)

if mode == "copy_without_source_sync":
    a0 = wp.full(n, 2.0, dtype=float, device="cuda:0")  # allocated and filled on cuda:0's stream
    a1 = wp.empty(n, dtype=float, device="cuda:1")
    wp.copy(a1, a0)                                     # on cuda:1's stream, no synchronize_device("cuda:0")
    wp.synchronize_device("cuda:1")
    wp.synchronize()
    print("warp_multi_gpu:", mode, "done")
    sys.exit(0)

# Clean. The explicit-stream peer copy, as documented.
stream0, stream1 = wp.get_stream("cuda:0"), wp.get_stream("cuda:1")
a0 = wp.full(n, 2.0, dtype=float, device="cuda:0")
a1 = wp.empty(n, dtype=float, device="cuda:1")
stream0.wait_stream(stream1)                            # the destination is ready
wp.copy(a1, a0, stream=stream0)
# The default rules: the copy runs on the destination's stream, after the source device is
# synchronized; the destination device is synchronized before the host reads.
b0 = wp.full(n, 3.0, dtype=float, device="cuda:0")
b1 = wp.empty(n, dtype=float, device="cuda:1")
wp.synchronize_device("cuda:0")
wp.copy(b1, b0)
wp.synchronize_device("cuda:1")
# A graph over a stream on each device, stream0 the capture's origin.
x0 = wp.full(n, 1.0, dtype=float, device="cuda:0")
y0 = wp.zeros(n, dtype=float, device="cuda:0")
x1 = wp.full(n, 1.0, dtype=float, device="cuda:1")
y1 = wp.zeros(n, dtype=float, device="cuda:1")
wp.synchronize()
s0, s1 = wp.Stream("cuda:0"), wp.Stream("cuda:1")
with wp.ScopedCapture(device="cuda:0", stream=s0) as capture:
    s1.wait_stream(s0)                                  # fork s1 into the capture
    wp.launch(scale, dim=n, inputs=[x0, y0, 2.0], stream=s0)
    wp.launch(scale, dim=n, inputs=[x1, y1, 3.0], stream=s1)
    s0.wait_stream(s1)                                  # join it back
for _ in range(3):
    wp.capture_launch(capture.graph, stream=s0)
wp.synchronize()
print("warp_multi_gpu:", mode, float(np.sum(a1.numpy())), float(np.sum(b1.numpy())),
      float(np.sum(y0.numpy())), float(np.sum(y1.numpy())))
