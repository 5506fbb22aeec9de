//! The measured loops. Each times every call (or pair of calls) it makes and returns the
//! latencies; the parent runs it with and without the shim and subtracts.
//!
//! The programs are correct (each stream works on its own buffers, waits come before use),
//! as a program that streamsan watches in CI mostly is: the figures are the cost of watching,
//! not of reporting.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use streamsan_driver_api::*;

use crate::driver::{check, Driver, Setup};
use crate::measured::{resident_bytes, Measured};
use crate::scaling::*;
use crate::stacks::{along, at_depth};
use crate::training::training_step;

/// A workload: runs against a driver and says what it measured.
type Workload = fn(&Driver) -> Measured;

/// The workloads, by name: the launch path, then the scaling rows (a call's cost after N
/// streams, buffers, graphs or races), then the training-shaped launches, then a staging loop
/// through pinned memory (the host-race guard at work).
pub const WORKLOADS: &[(&str, Workload)] = &[
    ("launch_1t", launch_one_thread),
    ("launch_legacy", launch_on_the_legacy_stream),
    ("launch_pytorch_like", launch_like_pytorch),
    ("launch_many_call_sites", launch_from_many_call_sites),
    ("launch_many_kernels", launch_many_kernels),
    ("launch_16t", launch_sixteen_threads),
    ("alloc_free", alloc_free),
    ("event", event_record_and_wait),
    ("launch_1m_buffers", launch_among_a_million_buffers),
    ("launch_1m_buffers_cold", launch_cold_among_a_million_buffers),
    ("sync_free_streams_2", sync_alloc_free::<2>),
    ("sync_free_streams_64", sync_alloc_free::<64>),
    ("sync_free_streams_1024", sync_alloc_free::<1024>),
    ("sync_free_streams_10k", sync_alloc_free::<10_000>),
    ("ctx_sync_streams_2", ctx_synchronize::<2>),
    ("ctx_sync_streams_64", ctx_synchronize::<64>),
    ("ctx_sync_streams_1024", ctx_synchronize::<1024>),
    ("ctx_sync_streams_10k", ctx_synchronize::<10_000>),
    ("fork_join_streams_2", fork_join::<2>),
    ("fork_join_streams_64", fork_join::<64>),
    ("fork_join_streams_1024", fork_join::<1024>),
    ("fork_join_streams_10k", fork_join::<10_000>),
    ("legacy_after_blocking_2", legacy_after_blocking::<2>),
    ("legacy_after_blocking_64", legacy_after_blocking::<64>),
    ("legacy_after_blocking_1024", legacy_after_blocking::<1024>),
    ("pointer_params_1", pointer_params::<1>),
    ("pointer_params_8", pointer_params::<8>),
    ("pointer_params_64", pointer_params::<64>),
    ("chunk_copies_1e3", chunk_copies::<1_000>),
    ("chunk_copies_1e4", chunk_copies::<10_000>),
    ("chunk_copies_1e5", chunk_copies::<100_000>),
    ("graph_after_1000_execs", graph_execs),
    ("stream_churn_1e4", stream_churn),
    ("races_100", races::<100>),
    ("races_1000", races::<1000>),
    ("races_3000", races::<3000>),
    ("free_among_100k_live", free_among_live::<100_000>),
    ("free_among_400k_live", free_among_live::<400_000>),
    ("alloc_async_among_100k_live", alloc_async_among_live::<100_000>),
    ("alloc_async_among_400k_live", alloc_async_among_live::<400_000>),
    ("training_step", training_step::<0, false, 0, false>),
    ("training_step_cold_2m", training_step::<2, false, 0, false>),
    ("training_step_cold_16m", training_step::<16, false, 0, false>),
    ("training_step_cold_64m", training_step::<64, false, 0, false>),
    ("training_step_prefetch", training_step::<0, true, 0, false>),
    ("training_step_synced", training_step::<0, false, 400, false>),
    ("training_step_synced_learn", training_step::<0, false, 400, false>),
    ("training_step_synced_often", training_step::<0, false, 4, false>),
    ("training_step_synced_ddp", training_step::<0, false, 400, true>),
    ("training_step_synced_prefetch_guarded", training_step::<0, true, 400, false>),
    ("pinned_copies", pinned_copies),
    ("pinned_copies_guarded", pinned_copies),
    ("counts_read_back", counts_read_back),
    ("counts_read_back_guarded", counts_read_back),
];

/// What the shim is told for a workload (`STREAMSAN_OPTIONS`): the racy ones, so that their
/// races do not fail the run, the `_learn` ones, which run `footprint=learn` against the
/// stand-in Compute Sanitizer library ([`needs_sanitizer`]), and the `_guarded` ones, which
/// run the host-race guard. Every other workload takes kernels' parameters
/// (`footprint=params`): the stand-in driver is no driver a toolkit's Compute Sanitizer
/// library could attach to, and the bench times the launch path, not the engine.
pub fn options(name: &str) -> &'static str {
    if needs_sanitizer(name) {
        "footprint=learn"
    } else if name.starts_with("races_") {
        "exitcode=0 footprint=params"
    } else if name.ends_with("_guarded") {
        "host_races=1 footprint=params"
    } else {
        "footprint=params"
    }
}

/// Whether a workload calls NCCL, and so needs a `libnccl.so.2` beside the driver (the
/// stand-in's, `tests/nccl-standin`).
pub fn needs_nccl(name: &str) -> bool {
    name.ends_with("_ddp")
}

/// Whether a workload runs under `footprint=learn`, and so needs the stand-in Compute
/// Sanitizer library (`tests/standin-sanitizer`) to play the footprint engine's device.
pub fn needs_sanitizer(name: &str) -> bool {
    name.ends_with("_learn")
}

/// The stand-in's device time per launch for a workload (`STANDIN_KERNEL_NS`,
/// `tests/standin/src/device_time.rs`): only the synchronized training steps' launches take
/// device time.
pub fn kernel_ns(name: &str) -> Option<u64> {
    name.starts_with("training_step_synced").then_some(crate::training::KERNEL_NS)
}

const WARM_UP: usize = 5_000;
/// Timed launches of the one-thread workloads.
const LAUNCHES: usize = 200_000;

/// Calls `call(i)` for `WARM_UP` untimed iterations, then `count` timed ones.
fn time_each(count: usize, mut call: impl FnMut(usize)) -> Vec<u64> {
    (0..WARM_UP).for_each(&mut call);
    (WARM_UP..WARM_UP + count)
        .map(|i| {
            let start = Instant::now();
            call(i);
            start.elapsed().as_nanos() as u64
        })
        .collect()
}

/// One thread, 8 streams, 64 live buffers: each launch passes four of its stream's eight.
fn launch_one_thread(driver: &Driver) -> Measured {
    const STREAMS: usize = 8;
    let setup = driver.setup();
    let streams: Vec<CUstream> = (0..STREAMS).map(|_| driver.stream()).collect();
    let buffers: Vec<CUdeviceptr> = (0..STREAMS * 8).map(|_| driver.buffer(256)).collect();
    let latencies = time_each(LAUNCHES, |i| {
        let s = i % STREAMS;
        let j = (i / STREAMS) % 8;
        let mut pointers = [0, 1, 2, 3].map(|k| buffers[s * 8 + (j + k) % 8]);
        // SAFETY: the setup's kernel on a live stream.
        check(unsafe { driver.launch(setup.quad, streams[s], &mut pointers) }, "cuLaunchKernel");
    });
    Measured::of(latencies)
}

/// One thread on the legacy default stream (handle 0), as PyTorch's and CuPy's default
/// streams are, with two blocking streams in the context that it synchronizes with.
fn launch_on_the_legacy_stream(driver: &Driver) -> Measured {
    let setup = driver.setup();
    let mut blocking = [core::ptr::null_mut(); 2];
    for s in &mut blocking {
        // SAFETY: an out-pointer to a local.
        check(unsafe { (driver.stream_create)(s, 0) }, "cuStreamCreate");
    }
    let buffers: Vec<CUdeviceptr> = (0..8).map(|_| driver.buffer(256)).collect();
    let latencies = time_each(LAUNCHES, |i| {
        let mut pointers = [0, 1, 2, 3].map(|k| buffers[(i + k) % 8]);
        // SAFETY: the setup's kernel on the legacy stream.
        check(unsafe { driver.launch(setup.quad, core::ptr::null_mut(), &mut pointers) }, "cuLaunchKernel");
    });
    Measured::of(latencies)
}

/// PyTorch's launch-bound loop (`x = x * c; x = x + c`, tests/gpu/perf/workload.py) as the
/// driver sees it: its elementwise kernel on the legacy default stream, from a native stack
/// some thirty frames deep (interpreter, dispatcher, TensorIterator, cudart), on 16 KiB
/// blocks that its caching allocator carves out of one 2 MiB segment and hands back and forth
/// (each op's output takes the block its input's predecessor freed).
fn launch_like_pytorch(driver: &Driver) -> Measured {
    const BLOCK: u64 = 16 << 10;
    let setup = driver.setup();
    let segment = driver.buffer(2 << 20);
    let blocks = [segment, segment + BLOCK];
    let latencies = time_each(LAUNCHES, |i| {
        let (input, output) = (blocks[i % 2], blocks[(i + 1) % 2]);
        at_depth(30, &mut || {
            // SAFETY: the setup's elementwise kernel on the legacy stream.
            check(
                unsafe { driver.launch_elementwise(setup.elementwise, core::ptr::null_mut(), 4096, output, input) },
                "cuLaunchKernel",
            );
        });
    });
    Measured::of(latencies)
}

/// Distinct call chains of `launch_many_call_sites`.
const CALL_SITES: usize = 768;

/// A training step as its call sites see it: the elementwise launch of
/// `launch_pytorch_like`, from 768 distinct native call chains cycled in a scrambled order
/// (each op of a step, forward and backward, reaches the driver by its own path). The chains
/// are 40 to 70 frames deep and share their stack depth in groups of 256, so that chains at
/// the same depth differ only in the return addresses of their middle frames.
fn launch_from_many_call_sites(driver: &Driver) -> Measured {
    const BLOCK: u64 = 16 << 10;
    let setup = driver.setup();
    let segment = driver.buffer(2 << 20);
    let blocks = [segment, segment + BLOCK];
    let latencies = time_each(LAUNCHES, |i| {
        let (input, output) = (blocks[i % 2], blocks[(i + 1) % 2]);
        // A scrambled cycle through the call sites (multiplier coprime to their count).
        let site = (i * 389) % CALL_SITES;
        at_depth(30 + 10 * (site / 256), &mut || {
            along((site % 256) as u32, 8, &mut || {
                // SAFETY: the setup's elementwise kernel on the legacy stream.
                check(
                    unsafe { driver.launch_elementwise(setup.elementwise, core::ptr::null_mut(), 4096, output, input) },
                    "cuLaunchKernel",
                );
            });
        });
    });
    Measured::of(latencies)
}

/// A training step as its kernels see it: 1024 distinct `extern "C"` kernels (as Triton's
/// are: no parameter types in the name, so every pointer's direction is learnt per kernel
/// and parameter), launched in turn with four pointers each to tensors of one 2 MiB segment.
fn launch_many_kernels(driver: &Driver) -> Measured {
    const KERNELS: usize = 1024;
    const TENSORS: u64 = 64;
    driver.setup();
    let kernels: Vec<CUfunction> = (0..KERNELS)
        .map(|k| {
            let name = format!("triton_k{k}");
            let ptx = format!(
                ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry {name}(\n  .param .u64 p0,\n  .param .u64 p1,\n  .param .u64 p2,\n  .param .u64 p3\n)\n{{\n ret;\n}}\n\0"
            );
            driver.kernel(&ptx, &std::ffi::CString::new(name).expect("a kernel name"))
        })
        .collect();
    let stream = driver.stream();
    let segment = driver.buffer(2 << 20);
    let tensor = |t: u64| segment + (t % TENSORS) * (32 << 10);
    let latencies = time_each(LAUNCHES, |i| {
        let k = (i * 389) % KERNELS;
        let t = i as u64;
        let mut pointers = [tensor(t), tensor(t + 1), tensor(t + 7), tensor(t + 13)];
        // SAFETY: four 8-byte parameters, a live stream.
        check(unsafe { driver.launch_pointers(kernels[k], stream, &mut pointers) }, "cuLaunchKernel");
    });
    Measured::of(latencies)
}

/// 16 threads launching at once, each on its own stream with its own four buffers.
fn launch_sixteen_threads(driver: &Driver) -> Measured {
    const THREADS: usize = 16;
    const PER_THREAD: usize = 20_000;
    let setup = driver.setup();
    let start = Arc::new(Barrier::new(THREADS));
    let context = setup.context as usize;
    let quad = setup.quad as usize;
    let latencies = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let start = start.clone();
                scope.spawn(move || {
                    // SAFETY: the context made by the setup.
                    check(unsafe { (driver.ctx_set_current)(context as CUcontext) }, "cuCtxSetCurrent");
                    let stream = driver.stream();
                    let mut pointers = [0; 4].map(|_| driver.buffer(256));
                    start.wait();
                    time_each(PER_THREAD, |_| {
                        pointers.rotate_left(1);
                        // SAFETY: the setup's kernel on this thread's stream.
                        check(unsafe { driver.launch(quad as CUfunction, stream, &mut pointers) }, "cuLaunchKernel");
                    })
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker")).collect()
    });
    Measured::of(latencies)
}

/// A stream-ordered allocation and its free on one stream.
fn alloc_free(driver: &Driver) -> Measured {
    const PAIRS: usize = 100_000;
    driver.setup();
    let stream = driver.stream();
    let latencies = time_each(PAIRS, |_| {
        let mut ptr = 0;
        // SAFETY: an out-pointer to a local; the pointer just allocated on this stream.
        unsafe {
            check((driver.mem_alloc_async)(&mut ptr, 256, stream), "cuMemAllocAsync");
            check((driver.mem_free_async)(ptr, stream), "cuMemFreeAsync");
        }
    });
    Measured::of(latencies)
}

/// A staging loop through pinned memory: a 1 MiB pinned buffer written, copied to the
/// device, copied back into another, the stream synchronized, the result read. With the
/// guard (`_guarded`), each copy's pages are protected when it is issued and
/// unprotected at the synchronize: of each 256-page copy, the first 16 pages and the last
/// (`host_race_pages`).
fn pinned_copies(driver: &Driver) -> Measured {
    const ITERATIONS: usize = 2_000;
    const BYTES: usize = 1 << 20;
    driver.setup();
    let stream = driver.stream();
    let device = driver.buffer(BYTES);
    let (mut staging, mut result) = (core::ptr::null_mut(), core::ptr::null_mut());
    // SAFETY: out-pointers to locals.
    unsafe {
        check((driver.mem_alloc_host)(&mut staging, BYTES), "cuMemAllocHost");
        check((driver.mem_alloc_host)(&mut result, BYTES), "cuMemAllocHost");
    }
    let (staging, result) = (staging.cast::<u8>(), result.cast::<u8>());
    let latencies = time_each(ITERATIONS, |i| {
        // SAFETY: pinned buffers of BYTES bytes, touched only when no copy is in flight.
        unsafe {
            staging.write_volatile(i as u8);
            check((driver.memcpy_htod_async)(device, staging.cast(), BYTES, stream), "cuMemcpyHtoDAsync");
            check((driver.memcpy_dtoh_async)(result.cast(), device, BYTES, stream), "cuMemcpyDtoHAsync");
            check((driver.stream_synchronize)(stream), "cuStreamSynchronize");
            assert_eq!(result.read_volatile(), i as u8);
        }
    });
    Measured::of(latencies)
}

/// A detection model's counts read back (PyTorch's `nonzero` and its kin): four launches,
/// an 8-byte copy of a count into pinned memory, the stream synchronized, the count read.
/// With the guard (`_guarded`), each count's page is protected at its copy and unprotected
/// at the synchronize, and the launches wait in the model's batch beside it.
fn counts_read_back(driver: &Driver) -> Measured {
    const ITERATIONS: usize = 20_000;
    let setup = driver.setup();
    let stream = driver.stream();
    let buffers: Vec<CUdeviceptr> = (0..8).map(|_| driver.buffer(256)).collect();
    let mut count = core::ptr::null_mut();
    // SAFETY: an out-pointer to a local.
    check(unsafe { (driver.mem_alloc_host)(&mut count, 8) }, "cuMemAllocHost");
    let count = count.cast::<u64>();
    let latencies = time_each(ITERATIONS, |i| {
        // SAFETY: the setup's kernel on a live stream; a pinned buffer of 8 bytes, read once
        // the copy into it is synchronized.
        unsafe {
            for k in 0..4 {
                let mut pointers = [0, 1, 2, 3].map(|j| buffers[(i + k + j) % 8]);
                check(driver.launch(setup.quad, stream, &mut pointers), "cuLaunchKernel");
            }
            check((driver.memcpy_dtoh_async)(count.cast(), buffers[i % 8], 8, stream), "cuMemcpyDtoHAsync");
            check((driver.stream_synchronize)(stream), "cuStreamSynchronize");
            core::hint::black_box(count.read_volatile());
        }
    });
    Measured::of(latencies)
}

/// An event recorded on one stream and waited on by another.
fn event_record_and_wait(driver: &Driver) -> Measured {
    const PAIRS: usize = 100_000;
    driver.setup();
    let (first, second) = (driver.stream(), driver.stream());
    let event = driver.event();
    let latencies = time_each(PAIRS, |_| {
        // SAFETY: live event and streams.
        unsafe {
            check((driver.event_record)(event, first), "cuEventRecord");
            check((driver.stream_wait_event)(second, event, 0), "cuStreamWaitEvent");
        }
    });
    Measured::of(latencies)
}

/// 1,000,000 live buffers of 64 bytes (packed by the thousand in each 2 MiB granule) and
/// 10,000 streams, then synchronized: the loop of [`launch_one_thread`] over 8 of the
/// streams and 64 buffers spread over the million. Measures how the model's tables and
/// clocks scale; also the resident bytes the buffers cost.
fn launch_among_a_million_buffers(driver: &Driver) -> Measured {
    let (setup, streams, buffers, buffer_bytes) = a_million_buffers(driver);
    let used: Vec<CUdeviceptr> = (0..64).map(|i| buffers[i * (buffers.len() / 64)]).collect();
    let latencies = time_each(LAUNCHES, |i| {
        let s = i % 8;
        let j = (i / 8) % 8;
        let mut pointers = [0, 1, 2, 3].map(|k| used[s * 8 + (j + k) % 8]);
        // SAFETY: the setup's kernel on a live stream.
        check(unsafe { driver.launch(setup.quad, streams[s], &mut pointers) }, "cuLaunchKernel");
    });
    Measured { buffer_bytes: Some(buffer_bytes), ..Measured::of(latencies) }
}

/// The same million buffers and ten thousand streams, every launch on the next stream with
/// four of its own hundred buffers: nothing a launch touches is in the processor's caches.
/// The worst case, not the common one.
fn launch_cold_among_a_million_buffers(driver: &Driver) -> Measured {
    let (setup, streams, buffers, _) = a_million_buffers(driver);
    let per_stream = buffers.len() / streams.len();
    let latencies = time_each(LAUNCHES, |i| {
        let s = i % streams.len();
        let j = (i / streams.len()) % (per_stream / 4);
        let mut pointers = [0, 1, 2, 3].map(|k| buffers[s * per_stream + j * 4 + k]);
        // SAFETY: the setup's kernel on a live stream.
        check(unsafe { driver.launch(setup.quad, streams[s], &mut pointers) }, "cuLaunchKernel");
    });
    Measured::of(latencies)
}

/// The setup, 10,000 streams and 1,000,000 buffers, synchronized; and the resident bytes the
/// buffers cost.
fn a_million_buffers(driver: &Driver) -> (Setup, Vec<CUstream>, Vec<CUdeviceptr>, i64) {
    const STREAMS: usize = 10_000;
    const BUFFERS: usize = 1_000_000;
    let setup = driver.setup();
    let streams: Vec<CUstream> = (0..STREAMS).map(|_| driver.stream()).collect();
    let mut buffers: Vec<CUdeviceptr> = Vec::with_capacity(BUFFERS);
    let before = resident_bytes();
    for _ in 0..BUFFERS {
        buffers.push(driver.buffer(64));
    }
    let buffer_bytes = resident_bytes() - before;
    // SAFETY: no arguments.
    check(unsafe { (driver.ctx_synchronize)() }, "cuCtxSynchronize");
    (setup, streams, buffers, buffer_bytes)
}
