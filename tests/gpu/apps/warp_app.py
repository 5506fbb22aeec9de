# NVIDIA Warp: the documentation's stream scenarios. Clean: ScopedStream (which waits for the
# previous stream), wait_stream, events, a graph captured over two streams, the producer and
# consumer streams with a pinned copy and an event, and the peer-copy example's ordering (the
# copy's stream waits for the stream that allocated the destination; one GPU here, so both
# streams are on it). Racy: the "Stream Usage Guidance" example, an array created on the
# current stream and used by a kernel on another stream without wait_stream; and the
# peer-copy example without its wait_stream (a copy into an array before its allocation).
# Usage: warp_app.py clean|array_on_another_stream|copy_without_wait
import sys
import numpy as np
import warp as wp

mode = sys.argv[1]
wp.config.quiet = True
wp.init()


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), factor: float):
    i = wp.tid()
    y[i] = factor * x[i]


n = 1 << 16
device = "cuda:0"
if mode == "array_on_another_stream":
    a = wp.zeros(n, dtype=float, device=device)        # allocated and zeroed on the current stream
    b = wp.empty(n, dtype=float, device=device)
    s = wp.Stream(device)
    wp.launch(scale, dim=n, inputs=[a, b, 2.0], stream=s)   # no s.wait_stream(...)
    wp.synchronize_device(device)
    print("warp_app:", mode, "done")
    sys.exit(0)

if mode == "copy_without_wait":
    with wp.ScopedDevice(device):
        src = wp.full(n, 3.0, dtype=float)
        stream0, stream1 = wp.Stream(), wp.Stream()
        stream0.wait_stream(wp.get_stream())    # src is ready for stream0
        with wp.ScopedStream(stream1):
            dst = wp.empty(n, dtype=float)      # allocated on stream1
        wp.copy(dst, src, stream=stream0)       # no stream0.wait_stream(stream1)
        wp.synchronize_device()
    print("warp_app:", mode, "done")
    sys.exit(0)

with wp.ScopedDevice(device):
    a = wp.array(np.arange(n, dtype=np.float32), dtype=float)
    s1, s2 = wp.Stream(), wp.Stream()
    with wp.ScopedStream(s1):                   # s1 waits for the current stream
        b = wp.empty(n, dtype=float)
        wp.launch(scale, dim=n, inputs=[a, b, 2.0])
    s2.wait_stream(s1)
    with wp.ScopedStream(s2):
        c = wp.empty(n, dtype=float)
        wp.launch(scale, dim=n, inputs=[b, c, 3.0])
    event = s2.record_event()
    wp.get_stream().wait_event(event)
    # A graph over two streams: fork s1 from the capturing stream, join it back.
    d = wp.zeros(n, dtype=float)
    e = wp.zeros(n, dtype=float)
    wp.synchronize_device()
    with wp.ScopedCapture() as capture:
        main = wp.get_stream()
        s1.wait_stream(main)
        wp.launch(scale, dim=n, inputs=[c, d, 0.5], stream=main)
        wp.launch(scale, dim=n, inputs=[c, e, 0.25], stream=s1)
        main.wait_stream(s1)
    for _ in range(5):
        wp.capture_launch(capture.graph)
    wp.synchronize_device()
    # Producer and consumer: a pinned host-to-device copy on one stream, an event, a kernel
    # on another.
    h = wp.full(n, 1.5, dtype=float, device="cpu", pinned=True)
    f = wp.empty(n, dtype=float)
    g = wp.empty(n, dtype=float)
    producer, consumer = wp.Stream(), wp.Stream()
    with wp.ScopedStream(producer):
        wp.copy(f, h)
        ready = wp.record_event()
    with wp.ScopedStream(consumer):
        wp.wait_event(ready)
        wp.launch(scale, dim=n, inputs=[f, g, 2.0])
    # The peer-copy ordering: wait for the stream that allocated the destination.
    stream0, stream1 = wp.Stream(), wp.Stream()
    stream0.wait_stream(consumer)
    with wp.ScopedStream(stream1):
        dst = wp.empty(n, dtype=float)
    stream0.wait_stream(stream1)
    wp.copy(dst, g, stream=stream0)
    wp.synchronize_device()
    print("warp_app:", mode, float(d.numpy().sum()), float(e.numpy().sum()), float(dst.numpy().sum()))
