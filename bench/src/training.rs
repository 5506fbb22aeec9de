//! A workload shaped like a training step's launches: what cuBLAS and PyTorch's kernels look
//! like to the driver, rather than the bench's four-pointer kernel. Launches go through
//! `cuLaunchKernelEx` with two attributes, from a native stack some 80 frames deep along one
//! of 256 chains (an interpreter, a dispatcher, cudart: recursion stands in), with a 344-byte
//! parameter block (a by-value structure with four tensor pointers at scattered offsets, as
//! PyTorch's `OffsetCalculator` holds them), over 400 tensors inside four 64 MiB segments (a
//! caching allocator's), with a memset every eighth call. The variants:
//!
//! - `_prefetch`: a side-stream prefetcher as timm's and PyTorch's loaders make it, every
//!   [`PREFETCH_EVERY`] calls (a copy from pinned memory and two event joins).
//! - `_synced`: the step in proportion to a GPT-2 step on a GPU: the host's own work before
//!   each call ([`HOST_WORK_NS`]), a device a little faster ([`KERNEL_NS`]), an optimizer's
//!   multi-tensor launches and a `cuCtxSynchronize` every [`STEP`] calls, which finds the
//!   device done and the shim's model still to be told the optimizer's launches; `_learn`
//!   runs it under `footprint=learn`, `_often` synchronizes every fourth call (as a program
//!   that reads results back between launches), `_ddp` all-reduces a gradient bucket on a
//!   communication stream every [`BUCKET_EVERY`] calls, `_prefetch_guarded` prefetches under
//!   the host-race guard, so that a copy from pinned memory is nearly always in flight.
//! - `_cold_*`: between timed calls, writes a byte in every cache line of an `EVICT_MIB` MiB
//!   buffer, as a real driver's and framework's work between launches would: 2 MiB evicts a
//!   core's L1 and L2, 16 MiB a good part of an L3, 64 MiB all of it. Only data is evicted;
//!   the instruction cache and branch predictors stay as warm as the loop leaves them.

use streamsan_driver_api::*;

use crate::driver::{check, Driver, Nccl, NCCL_FLOAT32, NCCL_SUM};
use crate::measured::Measured;
use crate::stacks::{along, at_depth};

/// `step(int, Params, float const*, float*)` with `Params` a 320-byte structure.
const NAME: &core::ffi::CStr = c"_Z4stepi6ParamsPKfPf";
const PTX: &str = concat!(
    ".version 7.0\n.target sm_52\n.address_size 64\n",
    ".visible .entry _Z4stepi6ParamsPKfPf(\n",
    "  .param .u32 p0,\n  .param .align 8 .b8 p1[320],\n  .param .u64 p2,\n  .param .u64 p3\n",
    ")\n{\n ret;\n}\n\0"
);

const SEGMENTS: usize = 4;
const SEGMENT_BYTES: usize = 64 << 20;
const TENSORS: usize = 400;
/// Distinct native chains the launches come from, as a framework's operators.
const OPERATORS: usize = 256;
const LAUNCHES: usize = 200_000;
const WARM_UP: usize = 5_000;
/// Bytes written to evict the caches over a cold variant's timed calls: its timed calls
/// are fewer as its buffer is larger, so that each variant runs for a few seconds.
const EVICTED_IN_ALL: usize = 64 << 30;
/// `training_step_prefetch`: calls from one prefetched batch to the next...
const PREFETCH_EVERY: usize = 32;
/// ...and the bytes of a batch.
const BATCH_BYTES: usize = 1 << 20;

/// `training_step_synced`: the host's work before each call...
const HOST_WORK_NS: u128 = 20_000;
/// ...the device's time per launch (`STANDIN_KERNEL_NS`, set by the bench for this
/// workload), less than the host's, so that the device is idle at each synchronize...
pub const KERNEL_NS: u64 = 18_000;
/// ...calls a step (GPT-2: about 415 launches and memsets, and one synchronize)...
const STEP: usize = 400;
/// ...of which the last before its end are the optimizer's...
const OPTIMIZER_LAUNCHES: usize = 24;
/// ...each with this many tensors' addresses (four lists: parameters, gradients and two
/// moments), and their element counts, in one by-value structure.
const OPTIMIZER_POINTERS: usize = 4 * 72;
/// `training_step_synced_ddp`: calls from one gradient bucket's all-reduce to the next
/// (four a step, as DDP's 25 MB buckets make them of a model of GPT-2's size)...
const BUCKET_EVERY: usize = STEP / 4;
/// ...and the bucket's bytes (what the stand-in NCCL copies onto itself).
const BUCKET_BYTES: usize = 64 << 10;
/// `adamw(Tensors)`, `Tensors` a structure of the pointers and 72 counts.
const OPTIMIZER_NAME: &core::ffi::CStr = c"_Z5adamw7Tensors";
const OPTIMIZER_PTX: &str = concat!(
    ".version 7.0\n.target sm_52\n.address_size 64\n",
    ".visible .entry _Z5adamw7Tensors(\n  .param .align 8 .b8 p0[2880]\n)\n{\n ret;\n}\n\0"
);

/// The by-value structure: 40 words, the pointers at words 3, 11, 20 and 33.
#[repr(C, align(8))]
struct Params([u64; 40]);

/// The step's launches, with the processor's data caches evicted of `EVICT_MIB` MiB between
/// timed calls (none: `training_step`), with a side-stream prefetcher if `PREFETCH`, and,
/// unless `SYNC_EVERY` is 0, with the host's work, the device's time, the optimizer and a
/// synchronize every `SYNC_EVERY` calls; with a gradient bucket all-reduced every
/// [`BUCKET_EVERY`] calls if `DDP`.
pub fn training_step<const EVICT_MIB: usize, const PREFETCH: bool, const SYNC_EVERY: usize, const DDP: bool>(
    driver: &Driver,
) -> Measured {
    let synced = SYNC_EVERY > 0;
    driver.setup();
    let kernel = driver.kernel(PTX, NAME);
    let segments: Vec<CUdeviceptr> = (0..SEGMENTS).map(|_| driver.buffer(SEGMENT_BYTES)).collect();
    let per_segment = TENSORS / SEGMENTS;
    let tensor_bytes = (SEGMENT_BYTES / per_segment) as u64;
    let tensors: Vec<CUdeviceptr> =
        (0..TENSORS).map(|t| segments[t % SEGMENTS] + (t / SEGMENTS) as u64 * tensor_bytes).collect();
    let legacy: CUstream = core::ptr::null_mut();
    let mut attrs = [
        // Programmatic stream serialization off, priority 0: neither orders anything.
        LaunchAttribute { id: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: [0; 4], value: [0; 8] },
        LaunchAttribute { id: 8, pad: [0; 4], value: [0; 8] },
    ];
    let config = LaunchConfig {
        grid_dim: [128, 1, 1],
        block_dim: [256, 1, 1],
        shared_mem_bytes: 0,
        stream: legacy,
        attrs: attrs.as_mut_ptr(),
        num_attrs: 2,
    };
    let prefetcher = PREFETCH.then(|| Prefetcher::new(driver));
    let optimizer = synced.then(|| driver.kernel(OPTIMIZER_PTX, OPTIMIZER_NAME));
    let reducer = DDP.then(|| Reducer::new(driver));
    let reduces = |i: usize| DDP && i % BUCKET_EVERY == BUCKET_EVERY / 2;
    let call = |i: usize| {
        let tensor = |k: usize| tensors[(i * 7 + k * 13) % TENSORS];
        if synced {
            let start = std::time::Instant::now();
            while start.elapsed().as_nanos() < HOST_WORK_NS {
                std::hint::spin_loop();
            }
            if i % SYNC_EVERY == SYNC_EVERY - 1 {
                if let Some(reducer) = &reducer {
                    reducer.join(driver, legacy);
                }
                // SAFETY: no arguments.
                check(unsafe { (driver.ctx_synchronize)() }, "cuCtxSynchronize");
                return;
            }
            if let Some(reducer) = reducer.as_ref().filter(|_| reduces(i)) {
                reducer.reduce(driver, i / BUCKET_EVERY, legacy);
                return;
            }
            if let Some(optimizer) = optimizer.filter(|_| i % STEP >= STEP - 1 - OPTIMIZER_LAUNCHES) {
                launch_optimizer(driver, optimizer, |k| tensors[(i + k) % TENSORS], legacy);
                return;
            }
        }
        let batch_read = match &prefetcher {
            Some(prefetcher) => match prefetcher.step(driver, i, legacy) {
                Phase::Called => return,
                Phase::Launch { reads_batch } => reads_batch.then_some(prefetcher.batch),
            },
            None => None,
        };
        if i % 8 == 7 {
            // SAFETY: a tensor inside its segment, on the legacy stream.
            check(unsafe { (driver.memset_d8_async)(tensor(0), 0, tensor_bytes as usize, legacy) }, "cuMemsetD8Async");
            return;
        }
        let mut n: u32 = 1 << 20;
        let mut params = Params([0; 40]);
        for (w, word) in params.0.iter_mut().enumerate() {
            // Sizes and strides, and two f32 scalars in one word.
            *word = match w % 4 {
                0 => 1 << 20,
                1 => 4096,
                2 => 0x3f80_0000_3f00_0000,
                _ => w as u64,
            };
        }
        for (k, w) in [3, 11, 20, 33].into_iter().enumerate() {
            params.0[w] = tensor(k);
        }
        let (mut input, mut output) = (batch_read.unwrap_or(tensor(4)), tensor(5));
        let mut pointers: [*mut c_void; 4] = [
            (&mut n as *mut u32).cast(),
            (&mut params as *mut Params).cast(),
            (&mut input as *mut u64).cast(),
            (&mut output as *mut u64).cast(),
        ];
        // One of 256 operators' chains, inside an interpreter's 60 frames.
        at_depth(60, &mut || {
            along((i % OPERATORS) as u32, 10, &mut || {
                // SAFETY: four parameter pointers for a four-parameter kernel; a live stream.
                check(
                    unsafe { (driver.launch_kernel_ex)(&config, kernel, pointers.as_mut_ptr(), core::ptr::null_mut()) },
                    "cuLaunchKernelEx",
                );
            })
        });
    };
    let mut evictor = vec![0u8; EVICT_MIB << 20];
    let timed = match (EVICT_MIB, synced) {
        // A hundred steps: a second of host work.
        (_, true) => 100 * STEP,
        (0, false) => LAUNCHES,
        _ => LAUNCHES.min(EVICTED_IN_ALL / evictor.len()),
    };
    // The warm-up is cold too, so that the shim's time per phase (`phase_times=1`, which
    // counts every call) is the cold calls' time.
    let warm_up = WARM_UP.min(timed / 4);
    for i in 0..warm_up {
        evict(&mut evictor);
        call(i);
    }
    let (mut waits, mut collectives) = (Vec::new(), Vec::new());
    let latencies = (warm_up..warm_up + timed)
        .map(|i| {
            evict(&mut evictor);
            let start = std::time::Instant::now();
            call(i);
            let took = start.elapsed().as_nanos() as u64;
            if synced && i % SYNC_EVERY == SYNC_EVERY - 1 {
                waits.push(took);
            } else if reduces(i) {
                collectives.push(took);
            }
            took
        })
        .collect();
    Measured { waits, collectives, ..Measured::of(latencies) }
}

/// DDP's reducer: a communication stream all-reducing gradient buckets, each in place in a
/// buffer of its own (the model's gradients stay the launches' alone, so the step stays
/// correct whatever the bench's launches write).
struct Reducer {
    nccl: Nccl,
    comm: NcclComm,
    stream: CUstream,
    buckets: Vec<CUdeviceptr>,
    /// Recorded on the step's stream when a bucket's gradients are ready...
    ready: CUevent,
    /// ...and on the communication stream after its all-reduce.
    reduced: CUevent,
}

impl Reducer {
    fn new(driver: &Driver) -> Reducer {
        let nccl = Nccl::load();
        let comm = nccl.communicator();
        let buckets = (0..STEP / BUCKET_EVERY).map(|_| driver.buffer(BUCKET_BYTES)).collect();
        Reducer { nccl, comm, stream: driver.stream(), buckets, ready: driver.event(), reduced: driver.event() }
    }

    /// Bucket `k`'s all-reduce, once the step's stream has produced it.
    fn reduce(&self, driver: &Driver, k: usize, step: CUstream) {
        let bucket = self.buckets[k % self.buckets.len()] as *mut c_void;
        // SAFETY: live streams and events; a bucket of BUCKET_BYTES, reduced in place.
        unsafe {
            check((driver.event_record)(self.ready, step), "cuEventRecord");
            check((driver.stream_wait_event)(self.stream, self.ready, 0), "cuStreamWaitEvent");
            let status = (self.nccl.all_reduce)(
                bucket,
                bucket,
                BUCKET_BYTES / 4,
                NCCL_FLOAT32,
                NCCL_SUM,
                self.comm,
                self.stream,
            );
            assert_eq!(status, NCCL_SUCCESS, "ncclAllReduce failed");
            check((driver.event_record)(self.reduced, self.stream), "cuEventRecord");
        }
    }

    /// The step's stream waits for the last all-reduce (DDP's `finalize_backward`).
    fn join(&self, driver: &Driver, step: CUstream) {
        // SAFETY: a live stream and event.
        check(unsafe { (driver.stream_wait_event)(step, self.reduced, 0) }, "cuStreamWaitEvent");
    }
}

/// Launches the optimizer's kernel on `stream` with the addresses of `OPTIMIZER_POINTERS`
/// tensors (`tensor(k)`) and their counts in its one by-value parameter.
fn launch_optimizer(driver: &Driver, optimizer: CUfunction, tensor: impl Fn(usize) -> CUdeviceptr, stream: CUstream) {
    let mut list = [0u64; OPTIMIZER_POINTERS + OPTIMIZER_POINTERS / 4];
    for (k, word) in list.iter_mut().enumerate() {
        *word = if k < OPTIMIZER_POINTERS { tensor(k) } else { 1 << 16 };
    }
    let mut params: [*mut c_void; 1] = [list.as_mut_ptr().cast()];
    let (grid, block) = ([64, 1, 1], [256, 1, 1]);
    // SAFETY: one parameter, the structure of 2880 bytes; a live stream.
    let status = unsafe {
        (driver.launch_kernel)(
            optimizer,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            0,
            stream,
            params.as_mut_ptr(),
            core::ptr::null_mut(),
        )
    };
    check(status, "cuLaunchKernel");
}

/// Writes a byte in every cache line of `evictor`, which pushes out of the caches what was
/// there before (dirty lines, as a driver's writes to its own structures leave them).
fn evict(evictor: &mut [u8]) {
    for line in evictor.chunks_mut(64) {
        line[0] = line[0].wrapping_add(1);
    }
    std::hint::black_box(evictor);
}

/// A side stream that loads each batch from pinned memory while the step runs.
struct Prefetcher {
    side: CUstream,
    host: *mut c_void,
    batch: CUdeviceptr,
    /// Recorded on the step's stream once it is done with the last batch...
    consumed: CUevent,
    /// ...and on the side stream once the next one is loaded.
    loaded: CUevent,
}

/// What the prefetcher made of a call.
enum Phase {
    /// It made the call's driver calls.
    Called,
    /// The call is the step's launch (the first after a batch arrived reads it).
    Launch { reads_batch: bool },
}

impl Prefetcher {
    fn new(driver: &Driver) -> Prefetcher {
        let mut host = core::ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check(unsafe { (driver.mem_alloc_host)(&mut host, BATCH_BYTES) }, "cuMemAllocHost");
        Prefetcher {
            side: driver.stream(),
            host,
            batch: driver.buffer(BATCH_BYTES),
            consumed: driver.event(),
            loaded: driver.event(),
        }
    }

    /// Call `i` of the step on `step`: the prefetcher's calls at four places among every
    /// [`PREFETCH_EVERY`].
    fn step(&self, driver: &Driver, i: usize, step: CUstream) -> Phase {
        // SAFETY: live streams and events, a pinned source and a device batch of BATCH_BYTES.
        unsafe {
            match i % PREFETCH_EVERY {
                12 => check((driver.event_record)(self.consumed, step), "cuEventRecord"),
                13 => check((driver.stream_wait_event)(self.side, self.consumed, 0), "cuStreamWaitEvent"),
                14 => {
                    check(
                        (driver.memcpy_htod_async)(self.batch, self.host, BATCH_BYTES, self.side),
                        "cuMemcpyHtoDAsync",
                    );
                    check((driver.event_record)(self.loaded, self.side), "cuEventRecord");
                }
                15 => check((driver.stream_wait_event)(step, self.loaded, 0), "cuStreamWaitEvent"),
                at => return Phase::Launch { reads_batch: at == 16 },
            }
        }
        Phase::Called
    }
}
