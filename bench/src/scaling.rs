//! Workloads whose cost must not grow with the program's history: each does one kind of call
//! after many streams, events, graph executables, races or buffers were made, at several
//! sizes, so that the figures at each size show whether a call's cost depends on what is live
//! and concurrent only.
//!
//! Sizes are type parameters: each size is a workload of its own name, run in its own
//! process. Like the other workloads the programs are correct (except `races_1000`, whose
//! point is its races), and a workload times only the call it is about.

use std::time::Instant;

use streamsan_driver_api::*;

use crate::driver::{check, Driver};
use crate::measured::{resident_bytes, Measured};

/// Times `call(i)` for `count` iterations; `call` returns the nanoseconds of the part it
/// times (its set-up around that part is not counted).
fn time_parts(count: usize, mut call: impl FnMut(usize) -> u64) -> Vec<u64> {
    (0..count).map(&mut call).collect()
}

/// Nanoseconds `f` took.
#[inline]
fn timed(f: impl FnOnce()) -> u64 {
    let start = Instant::now();
    f();
    start.elapsed().as_nanos() as u64
}

/// `n` non-blocking streams, each having launched once on a buffer of its own.
fn busy_streams(driver: &Driver, n: usize) -> Vec<CUstream> {
    let setup = driver.setup();
    (0..n)
        .map(|_| {
            let stream = driver.stream();
            let mut pointers = [driver.buffer(256); 4];
            // SAFETY: the setup's kernel on a live stream.
            check(unsafe { driver.launch(setup.quad, stream, &mut pointers) }, "cuLaunchKernel");
            stream
        })
        .collect()
}

/// A synchronous allocation and free (device-wide: the host waits for every stream of the
/// context) with `N` streams created.
pub fn sync_alloc_free<const N: usize>(driver: &Driver) -> Measured {
    let _streams = busy_streams(driver, N);
    let latencies = time_parts(20_000, |_| {
        timed(|| {
            let mut ptr = 0;
            // SAFETY: an out-pointer to a local; the pointer just allocated.
            unsafe {
                check((driver.mem_alloc)(&mut ptr, 256), "cuMemAlloc");
                check((driver.mem_free)(ptr), "cuMemFree");
            }
        })
    });
    Measured::of(latencies)
}

/// `cuCtxSynchronize` with `N` streams created.
pub fn ctx_synchronize<const N: usize>(driver: &Driver) -> Measured {
    let _streams = busy_streams(driver, N);
    // SAFETY: no arguments.
    let latencies = time_parts(20_000, |_| timed(|| check(unsafe { (driver.ctx_synchronize)() }, "cuCtxSynchronize")));
    Measured::of(latencies)
}

/// A fork-join step with `N` streams created: the main stream records, the next side stream
/// waits, launches on its buffer, records, and the main stream waits. Every side stream
/// takes part twice; the resident growth is what the steps cost in memory.
pub fn fork_join<const N: usize>(driver: &Driver) -> Measured {
    let setup = driver.setup();
    let main = driver.stream();
    let sides: Vec<CUstream> = (0..N).map(|_| driver.stream()).collect();
    let buffers: Vec<CUdeviceptr> = (0..N).map(|_| driver.buffer(256)).collect();
    let (forked, joined) = (driver.event(), driver.event());
    let before = resident_bytes();
    let latencies = time_parts((2 * N).max(20_000), |i| {
        let s = i % N;
        timed(|| {
            let mut pointers = [buffers[s]; 4];
            // SAFETY: live streams, events, and the setup's kernel.
            unsafe {
                check((driver.event_record)(forked, main), "cuEventRecord");
                check((driver.stream_wait_event)(sides[s], forked, 0), "cuStreamWaitEvent");
                check(driver.launch(setup.quad, sides[s], &mut pointers), "cuLaunchKernel");
                check((driver.event_record)(joined, sides[s]), "cuEventRecord");
                check((driver.stream_wait_event)(main, joined, 0), "cuStreamWaitEvent");
            }
        })
    });
    Measured { resident_growth: Some(resident_bytes() - before), ..Measured::of(latencies) }
}

/// A launch on the legacy default stream right after one of `B` blocking streams launched
/// (the legacy stream must then synchronize with it): only the legacy launch is timed.
pub fn legacy_after_blocking<const B: usize>(driver: &Driver) -> Measured {
    let setup = driver.setup();
    let blocking: Vec<CUstream> = (0..B)
        .map(|_| {
            let mut s = core::ptr::null_mut();
            // SAFETY: an out-pointer to a local.
            check(unsafe { (driver.stream_create)(&mut s, 0) }, "cuStreamCreate");
            s
        })
        .collect();
    let buffers: Vec<CUdeviceptr> = (0..B + 1).map(|_| driver.buffer(256)).collect();
    let latencies = time_parts(50_000, |i| {
        let b = i % B;
        let mut mine = [buffers[b]; 4];
        let mut legacy = [buffers[B]; 4];
        // SAFETY: the setup's kernel on live streams.
        check(unsafe { driver.launch(setup.quad, blocking[b], &mut mine) }, "cuLaunchKernel");
        timed(|| check(unsafe { driver.launch(setup.quad, core::ptr::null_mut(), &mut legacy) }, "cuLaunchKernel"))
    });
    Measured::of(latencies)
}

/// A PTX image with one kernel `name` of `count` pointer parameters.
fn pointers_ptx(name: &str, count: usize) -> String {
    let params: Vec<String> = (0..count).map(|i| format!("  .param .u64 p{i}")).collect();
    format!(
        ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry {name}(\n{}\n)\n{{\n ret;\n}}\n\0",
        params.join(",\n")
    )
}

/// A kernel with `P` pointer parameters, launched on 8 streams in turn, each stream with
/// `P` buffers of its own: `8 × P` distinct pointers in all.
pub fn pointer_params<const P: usize>(driver: &Driver) -> Measured {
    const STREAMS: usize = 8;
    driver.setup();
    let name = format!("pointers{P}");
    let kernel = driver.kernel(&pointers_ptx(&name, P), &std::ffi::CString::new(name).expect("a name"));
    let streams: Vec<CUstream> = (0..STREAMS).map(|_| driver.stream()).collect();
    let buffers: Vec<Vec<CUdeviceptr>> = (0..STREAMS).map(|_| (0..P).map(|_| driver.buffer(256)).collect()).collect();
    let latencies = time_parts(100_000, |i| {
        let s = i % STREAMS;
        let mut pointers = buffers[s].clone();
        // SAFETY: a kernel of P pointer parameters on a live stream.
        timed(|| check(unsafe { driver.launch_pointers(kernel, streams[s], &mut pointers) }, "cuLaunchKernel"))
    });
    Measured::of(latencies)
}

/// `N` copies of 64 bytes into every other 64-byte chunk of one buffer that a memset wrote
/// whole first, on one stream: each copy splits what the memset left.
pub fn chunk_copies<const N: usize>(driver: &Driver) -> Measured {
    driver.setup();
    let stream = driver.stream();
    let target = driver.buffer(128 * N);
    let source = driver.buffer(64);
    // SAFETY: live buffers and stream.
    check(unsafe { (driver.memset_d8_async)(target, 0, 128 * N, stream) }, "cuMemsetD8Async");
    let latencies = time_parts(N, |i| {
        // SAFETY: 64 bytes inside both buffers.
        timed(|| {
            check(
                unsafe { (driver.memcpy_dtod_async)(target + 128 * i as u64, source, 64, stream) },
                "cuMemcpyDtoDAsync",
            )
        })
    });
    Measured::of(latencies)
}

/// A 10-kernel graph captured on a stream, instantiated, launched and destroyed, again and
/// again: after the first 1000 executable graphs, each instantiate and launch is timed.
pub fn graph_execs(driver: &Driver) -> Measured {
    const UNTIMED: usize = 1000;
    let setup = driver.setup();
    let stream = driver.stream();
    let mut pointers = [0, 1, 2, 3].map(|_| driver.buffer(256));
    let latencies: Vec<u64> = (0..UNTIMED + 5_000)
        .map(|_| {
            let (mut graph, mut exec) = (core::ptr::null_mut(), core::ptr::null_mut());
            // SAFETY: a live stream; the setup's kernel; out-pointers to locals.
            unsafe {
                check((driver.stream_begin_capture)(stream, 0), "cuStreamBeginCapture");
                for _ in 0..10 {
                    check(driver.launch(setup.quad, stream, &mut pointers), "cuLaunchKernel");
                }
                check((driver.stream_end_capture)(stream, &mut graph), "cuStreamEndCapture");
                let took = timed(|| {
                    check((driver.graph_instantiate)(&mut exec, graph, 0), "cuGraphInstantiate");
                    check((driver.graph_launch)(exec, stream), "cuGraphLaunch");
                });
                check((driver.graph_exec_destroy)(exec), "cuGraphExecDestroy");
                check((driver.graph_destroy)(graph), "cuGraphDestroy");
                took
            }
        })
        .skip(UNTIMED)
        .collect();
    Measured::of(latencies)
}

/// Rounds of stream churn: 10,000 streams each created, forked from and joined into a main
/// stream, and destroyed; then one synchronous free. The free is timed; the resident growth
/// over the rounds is what the destroyed streams still cost.
pub fn stream_churn(driver: &Driver) -> Measured {
    const ROUNDS: usize = 5;
    const PER_ROUND: usize = 10_000;
    let setup = driver.setup();
    let main = driver.stream();
    let (forked, joined) = (driver.event(), driver.event());
    let mut pointers = [driver.buffer(256); 4];
    let before = resident_bytes();
    let latencies = (0..ROUNDS)
        .map(|_| {
            for _ in 0..PER_ROUND {
                let side = driver.stream();
                // SAFETY: live streams, events, and the setup's kernel.
                unsafe {
                    check((driver.event_record)(forked, main), "cuEventRecord");
                    check((driver.stream_wait_event)(side, forked, 0), "cuStreamWaitEvent");
                    check(driver.launch(setup.quad, side, &mut pointers), "cuLaunchKernel");
                    check((driver.event_record)(joined, side), "cuEventRecord");
                    check((driver.stream_wait_event)(main, joined, 0), "cuStreamWaitEvent");
                    check((driver.stream_destroy)(side), "cuStreamDestroy");
                }
            }
            let ptr = driver.buffer(256);
            // SAFETY: the pointer just allocated.
            timed(|| check(unsafe { (driver.mem_free)(ptr) }, "cuMemFree"))
        })
        .collect();
    Measured { resident_growth: Some(resident_bytes() - before), ..Measured::of(latencies) }
}

/// A PTX image of `count` kernels `_Z<len>r<i>Pf`, each `r<i>(float*)`.
fn race_kernels_ptx(count: usize) -> String {
    let mut ptx = String::from(".version 7.0\n.target sm_52\n.address_size 64\n");
    for i in 0..count {
        let name = format!("r{i}");
        ptx.push_str(&format!(".visible .entry _Z{}{name}Pf(\n  .param .u64 p0\n)\n{{\n ret;\n}}\n", name.len()));
    }
    ptx.push('\0');
    ptx
}

/// `RACES` distinct races: kernel `i` writes buffer `i` on one stream, then again on another
/// with nothing between. The second launch, which finds a new race, is timed. Run with
/// `exitcode=0`: the races are the point.
pub fn races<const RACES: usize>(driver: &Driver) -> Measured {
    driver.setup();
    let ptx = race_kernels_ptx(RACES);
    let kernels: Vec<CUfunction> = (0..RACES)
        .map(|i| {
            let name = format!("r{i}");
            driver.kernel(&ptx, &std::ffi::CString::new(format!("_Z{}{name}Pf", name.len())).expect("a name"))
        })
        .collect();
    let (first, second) = (driver.stream(), driver.stream());
    let buffers: Vec<CUdeviceptr> = (0..RACES).map(|_| driver.buffer(256)).collect();
    let latencies = time_parts(RACES, |i| {
        let mut pointer = [buffers[i]];
        // SAFETY: a one-pointer kernel on live streams.
        unsafe {
            check(driver.launch_pointers(kernels[i], first, &mut pointer), "cuLaunchKernel");
            timed(|| check(driver.launch_pointers(kernels[i], second, &mut pointer), "cuLaunchKernel"))
        }
    });
    Measured::of(latencies)
}

/// Frees timed in the live-buffer workloads: more than the model's quarantine of freed
/// buffers holds, so that most frees also forget the oldest freed buffer.
const FREES: usize = 100_000;

/// `L` live buffers of 256 bytes; then a free of one of them, timed, and its allocation
/// again (the stand-in hands the same address back).
pub fn free_among_live<const L: usize>(driver: &Driver) -> Measured {
    driver.setup();
    let mut buffers: Vec<CUdeviceptr> = (0..L).map(|_| driver.buffer(256)).collect();
    let latencies = time_parts(FREES, |i| {
        // Spread over the whole set, far apart from one free to the next.
        let j = (i * 7919) % L;
        // SAFETY: a live buffer.
        let took = timed(|| check(unsafe { (driver.mem_free)(buffers[j]) }, "cuMemFree"));
        buffers[j] = driver.buffer(256);
        took
    });
    Measured::of(latencies)
}

/// `L` live buffers of 256 bytes; then, again and again, one of them freed and a
/// stream-ordered allocation, timed, which the stand-in places at the freed address, among
/// the others (as a pool reuses its blocks).
pub fn alloc_async_among_live<const L: usize>(driver: &Driver) -> Measured {
    driver.setup();
    let stream = driver.stream();
    let mut buffers: Vec<CUdeviceptr> = (0..L).map(|_| driver.buffer(256)).collect();
    let latencies = time_parts(FREES, |i| {
        let j = (i * 7919) % L;
        // SAFETY: a live buffer (allocated synchronously, or on `stream`, which the
        // synchronous free waits for).
        check(unsafe { (driver.mem_free)(buffers[j]) }, "cuMemFree");
        let mut ptr = 0;
        // SAFETY: an out-pointer to a local; a live stream.
        let took = timed(|| check(unsafe { (driver.mem_alloc_async)(&mut ptr, 256, stream) }, "cuMemAllocAsync"));
        buffers[j] = ptr;
        took
    });
    Measured::of(latencies)
}
