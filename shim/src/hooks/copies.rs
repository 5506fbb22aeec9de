//! Copies: the bytes they read and write, and how they order the host, by CUDA's "API
//! synchronization behavior" per memory kind ([`synchronous`], [`asynchronous`]). A 2D or 3D
//! copy touches its rows, past [`MAX_ROWS`] the cover from its first byte to its last; an
//! array side, the array's bytes as [`super::arrays`] places them.

use core::ffi::c_void;

use streamsan::model::op::{Access, HostEffect, Mode};
use streamsan::model::streams::StreamRef;
use streamsan::model::Work;
use streamsan::options::PageableCopies;
use streamsan::phases::{self, Phase};
use streamsan_driver_api::*;

use super::arrays;
use super::batch;
use super::call::{default_stream, handle_of, ok, origin, stream};
use super::model::{model, settle, unsettled, with_accesses};
use crate::host_races;
use crate::intercept::driver;
use crate::intercept::options::options;
use crate::intercept::variants::{real, Call};

/// Rows of a 2D/3D copy tracked one by one.
pub const MAX_ROWS: usize = 32;

/// Where one side of a copy lives, as the rules for synchronous copies need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memory {
    Device,
    PinnedHost,
    PageableHost,
}

/// The memory at `addr`: a known buffer's kind; anything else is pageable host memory.
/// (Where buffers lie is told at once, never queued: the batch need not be told first.)
fn memory_at(addr: u64) -> Memory {
    match unsettled().memory_kind(addr) {
        Some(kind) if kind.is_host() => Memory::PinnedHost,
        Some(_) => Memory::Device,
        None => Memory::PageableHost,
    }
}

/// How a synchronous copy orders the host.
fn synchronous(src: Memory, dst: Memory) -> HostEffect {
    match (src, dst) {
        (Memory::Device, Memory::Device) => HostEffect::None,
        // From pageable memory: the stream is drained first, but the call may return
        // before the DMA lands.
        (Memory::PageableHost, Memory::Device) => HostEffect::WaitsForEarlierWork,
        // From pinned memory, to the host, host to host: the host waits for the copy.
        _ => HostEffect::WaitsForOperation,
    }
}

/// How an asynchronous copy orders the host, as CUDA documents it ("API synchronization
/// behavior"): to pageable host memory from the device, the call returns once the copy has
/// completed (CUDA's earlier wording; `--pageable-copies async` takes the current one's
/// "might be synchronous" as not to be relied on); host to host, it is fully synchronous.
/// Every other direction leaves the host unordered: from pageable memory the driver may
/// stage the copy and wait for the stream, but a program may not rely on it.
fn asynchronous(src: Memory, dst: Memory) -> HostEffect {
    match (src, dst) {
        (Memory::Device, Memory::PageableHost) if options().pageable_copies == PageableCopies::Wait => {
            HostEffect::WaitsForOperation
        }
        (Memory::Device, _) | (_, Memory::Device) => HostEffect::None,
        _ => HostEffect::WaitsForOperation,
    }
}

/// Before the real call of a copy the host waits for (`host`), while the host-race guard
/// has copies in flight (which has such a copy told at once, [`telling`]): tells the
/// model the work waiting in its batch now, while the device finishes what the host will
/// wait for, not after it (PyTorch's `.item()` is a launch, then a copy to pageable memory
/// that waits).
fn before_waiting(host: HostEffect) {
    if host != HostEffect::None && host_races::in_flight() {
        settle();
    }
}

/// How a copy reaches the model, with the host-race guard on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Telling {
    /// In its [`batch`], as without the guard: a copy without a side in memory the host
    /// reaches that the host does not wait for, or one it waits for with nothing guarded.
    Queued,
    /// In its batch, its bytes the host reaches guarded now under a pending epoch
    /// ([`host_races::work_queued`]): a copy the host does not wait for.
    Guarded,
    /// At once: such a copy on a stream that may be capturing, whose epoch (or whether it
    /// runs at all) only the model, told, can give; and a copy the host waits for while
    /// copies are guarded (the guard lifts what the host joined by the host's clock, after
    /// the call).
    AtOnce,
}

fn telling(on: StreamRef, reads: &[(u64, u64)], writes: &[(u64, u64)], host: HostEffect) -> Telling {
    if !host_races::enabled() {
        return Telling::Queued;
    }
    match host {
        HostEffect::None if reads.iter().chain(writes).any(|&(addr, len)| len > 0 && host_reaches(addr)) => {
            if driver::may_be_capturing(handle_of(on)) {
                Telling::AtOnce
            } else {
                Telling::Guarded
            }
        }
        HostEffect::None => Telling::Queued,
        _ if host_races::in_flight() => Telling::AtOnce,
        _ => Telling::Queued,
    }
}

/// Whether the host's loads and stores reach the memory at `addr` (pinned, registered or
/// managed): a copy the host does not wait for is guarded there.
fn host_reaches(addr: u64) -> bool {
    unsettled().memory_kind(addr).is_some_and(|k| k.host_reachable())
}

/// Adds to `out` the accesses of a copy that reads `reads` and writes `writes`.
fn push_copy_accesses(out: &mut Vec<Access>, reads: &[(u64, u64)], writes: &[(u64, u64)]) {
    out.extend(
        reads
            .iter()
            .map(|&(addr, len)| Access::new(addr, len, Mode::Read))
            .chain(writes.iter().map(|&(addr, len)| Access::new(addr, len, Mode::Write)))
            .filter(|a| a.addr != 0 && a.len != 0),
    );
}

/// Tells the model of a copy on `on` that reads `reads` and writes `writes`. The copy waits
/// in the model's [`batch`] with the launches around it (the host's wait for it, if any,
/// with it), unless the host-race guard needs it told at once ([`telling`]); a copy the
/// host does not wait for has its pinned host bytes guarded.
fn copied(call: &Call, on: StreamRef, reads: &[(u64, u64)], writes: &[(u64, u64)], host: HostEffect) {
    let origin = origin(call);
    let telling = telling(on, reads, writes, host);
    with_accesses(|accesses| {
        push_copy_accesses(accesses, reads, writes);
        let work = Work { origin, kernel: None, accesses, host };
        match telling {
            Telling::Queued => batch::queue(unsettled(), on, work, Phase::CopyModel),
            Telling::Guarded => {
                let model = unsettled();
                match host_races::work_queued(&origin, None, model.slot_of(on), reads, writes) {
                    Some(pending) => batch::queue_guarded(model, on, work, Phase::CopyModel, pending),
                    None => batch::queue(model, on, work, Phase::CopyModel),
                }
            }
            Telling::AtOnce => {
                let _timer = phases::start(Phase::CopyModel);
                if let (Some(epoch), HostEffect::None) = (model().work(on, work), host) {
                    host_races::work_issued(&origin, None, epoch, reads, writes, &[]);
                }
            }
        }
    });
    // A copy that orders the host completed what the host waited for: measured footprints
    // can be read (a phase of its own).
    if host != HostEffect::None {
        super::footprint::collect();
    }
}

/// A 2D or 3D copy's descriptor: `CUDA_MEMCPY2D`, `CUDA_MEMCPY3D`, `CUDA_MEMCPY3D_PEER`.
pub trait Descriptor {
    fn strided(&self) -> Strided;
}

/// `CUDA_MEMCPY3D` and `CUDA_MEMCPY3D_PEER` name their sides' fields alike.
macro_rules! descriptor_3d {
    ($descriptor:ty) => {
        impl Descriptor for $descriptor {
            fn strided(&self) -> Strided {
                let c = self;
                let src = Side {
                    memory_type: c.src_memory_type,
                    host: c.src_host as u64,
                    device: c.src_device,
                    array: c.src_array,
                    x: c.src_x_in_bytes,
                    y: c.src_y,
                    z: c.src_z,
                    pitch: c.src_pitch,
                    height: c.src_height,
                };
                let dst = Side {
                    memory_type: c.dst_memory_type,
                    host: c.dst_host as u64,
                    device: c.dst_device,
                    array: c.dst_array,
                    x: c.dst_x_in_bytes,
                    y: c.dst_y,
                    z: c.dst_z,
                    pitch: c.dst_pitch,
                    height: c.dst_height,
                };
                Strided { src, dst, width: c.width_in_bytes, rows: c.height, depth: c.depth }
            }
        }
    };
}

descriptor_3d!(Memcpy3D);
descriptor_3d!(Memcpy3DPeer);

/// The accesses of a 3D copy (a graph's memcpy node).
pub(super) fn copy_3d_accesses(copy: &Memcpy3D) -> Vec<Access> {
    let Strided { src, dst, width, rows, depth } = copy.strided();
    let mut accesses = Vec::new();
    push_copy_accesses(&mut accesses, &src.rows(width, rows, depth), &dst.rows(width, rows, depth));
    accesses
}

/// A linear copy of `bytes` from `src` to `dst`.
fn linear(call: &Call, on: StreamRef, dst: u64, src: u64, bytes: usize, host: HostEffect) {
    copied(call, on, &[(src, bytes as u64)], &[(dst, bytes as u64)], host);
}

pub unsafe fn memcpy(call: &Call, real: real::memcpy, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> CUresult {
    let host = synchronous(memory_at(src), memory_at(dst));
    before_waiting(host);
    let status = unsafe { real(dst, src, bytes) };
    if ok(status) {
        linear(call, default_stream(call), dst, src, bytes, host);
    }
    status
}

pub unsafe fn memcpy_async(
    call: &Call,
    real: real::memcpy_async,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let host = asynchronous(memory_at(src), memory_at(dst));
    before_waiting(host);
    let status = unsafe { real(dst, src, bytes, h_stream) };
    if ok(status) {
        linear(call, stream(call, h_stream), dst, src, bytes, host);
    }
    status
}

pub unsafe fn memcpy_htod(
    call: &Call,
    real: real::memcpy_htod,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> CUresult {
    let host = synchronous(memory_at(src as u64), Memory::Device);
    before_waiting(host);
    let status = unsafe { real(dst, src, bytes) };
    if ok(status) {
        linear(call, default_stream(call), dst, src as u64, bytes, host);
    }
    status
}

pub unsafe fn memcpy_dtoh(
    call: &Call,
    real: real::memcpy_dtoh,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
) -> CUresult {
    before_waiting(HostEffect::WaitsForOperation);
    let status = unsafe { real(dst, src, bytes) };
    if ok(status) {
        linear(call, default_stream(call), dst as u64, src, bytes, HostEffect::WaitsForOperation);
    }
    status
}

pub unsafe fn memcpy_dtod(
    call: &Call,
    real: real::memcpy_dtod,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, src, bytes) };
    if ok(status) {
        linear(call, default_stream(call), dst, src, bytes, HostEffect::None);
    }
    status
}

/// The bytes of a 1D copy of `bytes` bytes at byte `offset` of `array`; none for a handle
/// this process did not make.
fn array_bytes(array: CUarray, offset: usize, bytes: usize) -> Option<(u64, u64)> {
    arrays::find(array).map(|a| a.linear(offset, bytes))
}

/// Device to array: device memory on both sides.
pub unsafe fn memcpy_dtoa(
    call: &Call,
    real: real::memcpy_dtoa,
    dst: CUarray,
    dst_offset: usize,
    src: CUdeviceptr,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, dst_offset, src, bytes) };
    if ok(status) {
        let writes = array_bytes(dst, dst_offset, bytes);
        copied(call, default_stream(call), &[(src, bytes as u64)], writes.as_slice(), HostEffect::None);
    }
    status
}

/// Array to device: device memory on both sides.
pub unsafe fn memcpy_atod(
    call: &Call,
    real: real::memcpy_atod,
    dst: CUdeviceptr,
    src: CUarray,
    src_offset: usize,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, src, src_offset, bytes) };
    if ok(status) {
        let reads = array_bytes(src, src_offset, bytes);
        copied(call, default_stream(call), reads.as_slice(), &[(dst, bytes as u64)], HostEffect::None);
    }
    status
}

/// Array to array: device memory on both sides.
pub unsafe fn memcpy_atoa(
    call: &Call,
    real: real::memcpy_atoa,
    dst: CUarray,
    dst_offset: usize,
    src: CUarray,
    src_offset: usize,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, dst_offset, src, src_offset, bytes) };
    if ok(status) {
        let (reads, writes) = (array_bytes(src, src_offset, bytes), array_bytes(dst, dst_offset, bytes));
        copied(call, default_stream(call), reads.as_slice(), writes.as_slice(), HostEffect::None);
    }
    status
}

/// Host to array: from pageable or pinned memory, the host is ordered as by a copy to the
/// device.
pub unsafe fn memcpy_htoa(
    call: &Call,
    real: real::memcpy_htoa,
    dst: CUarray,
    dst_offset: usize,
    src: *const c_void,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, dst_offset, src, bytes) };
    if ok(status) {
        let host = synchronous(memory_at(src as u64), Memory::Device);
        let writes = array_bytes(dst, dst_offset, bytes);
        copied(call, default_stream(call), &[(src as u64, bytes as u64)], writes.as_slice(), host);
    }
    status
}

/// Array to host: the host waits for the copy.
pub unsafe fn memcpy_atoh(
    call: &Call,
    real: real::memcpy_atoh,
    dst: *mut c_void,
    src: CUarray,
    src_offset: usize,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, src, src_offset, bytes) };
    if ok(status) {
        let reads = array_bytes(src, src_offset, bytes);
        let writes = [(dst as u64, bytes as u64)];
        copied(call, default_stream(call), reads.as_slice(), &writes, HostEffect::WaitsForOperation);
    }
    status
}

pub unsafe fn memcpy_htoa_async(
    call: &Call,
    real: real::memcpy_htoa_async,
    dst: CUarray,
    dst_offset: usize,
    src: *const c_void,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, dst_offset, src, bytes, h_stream) };
    if ok(status) {
        let host = asynchronous(memory_at(src as u64), Memory::Device);
        let writes = array_bytes(dst, dst_offset, bytes);
        copied(call, stream(call, h_stream), &[(src as u64, bytes as u64)], writes.as_slice(), host);
    }
    status
}

pub unsafe fn memcpy_atoh_async(
    call: &Call,
    real: real::memcpy_atoh_async,
    dst: *mut c_void,
    src: CUarray,
    src_offset: usize,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, src, src_offset, bytes, h_stream) };
    if ok(status) {
        // To pageable memory, the call returns once the copy is done, as from device memory.
        let host = asynchronous(Memory::Device, memory_at(dst as u64));
        let reads = array_bytes(src, src_offset, bytes);
        copied(call, stream(call, h_stream), reads.as_slice(), &[(dst as u64, bytes as u64)], host);
    }
    status
}

/// Host to device on a stream: what the host waits for depends on the source's memory.
pub unsafe fn memcpy_htod_async(
    call: &Call,
    real: real::memcpy_htod_async,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, src, bytes, h_stream) };
    if ok(status) {
        let host = asynchronous(memory_at(src as u64), Memory::Device);
        linear(call, stream(call, h_stream), dst, src as u64, bytes, host);
    }
    status
}

pub unsafe fn memcpy_dtoh_async(
    call: &Call,
    real: real::memcpy_dtoh_async,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let host = asynchronous(Memory::Device, memory_at(dst as u64));
    before_waiting(host);
    let status = unsafe { real(dst, src, bytes, h_stream) };
    if ok(status) {
        linear(call, stream(call, h_stream), dst as u64, src, bytes, host);
    }
    status
}

/// Device to device on a stream: device memory on both sides, the host not held.
pub unsafe fn memcpy_dtod_async(
    call: &Call,
    real: real::memcpy_dtod_async,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, src, bytes, h_stream) };
    if ok(status) {
        linear(call, stream(call, h_stream), dst, src, bytes, HostEffect::None);
    }
    status
}

/// A peer copy between devices: on the calling context's default stream.
pub unsafe fn memcpy_peer(
    call: &Call,
    real: real::memcpy_peer,
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
) -> CUresult {
    let status = unsafe { real(dst, dst_ctx, src, src_ctx, bytes) };
    if ok(status) {
        linear(call, default_stream(call), dst, src, bytes, HostEffect::None);
    }
    status
}

pub unsafe fn memcpy_peer_async(
    call: &Call,
    real: real::memcpy_peer_async,
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, dst_ctx, src, src_ctx, bytes, h_stream) };
    if ok(status) {
        linear(call, stream(call, h_stream), dst, src, bytes, HostEffect::None);
    }
    status
}

/// One side of a 2D or 3D copy.
struct Side {
    memory_type: u32,
    host: u64,
    device: u64,
    array: CUarray,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    /// Rows per slice (3D).
    height: usize,
}

impl Side {
    /// The address of the side's first byte, if it is linear memory.
    fn base(&self) -> Option<u64> {
        match self.memory_type {
            CU_MEMORYTYPE_HOST => Some(self.host),
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => Some(self.device),
            _ => None,
        }
    }

    fn memory(&self) -> Memory {
        match (self.memory_type, self.base()) {
            (CU_MEMORYTYPE_HOST, Some(addr)) => match memory_at(addr) {
                Memory::Device => Memory::PinnedHost,
                other => other,
            },
            (CU_MEMORYTYPE_UNIFIED, Some(addr)) => memory_at(addr),
            _ => Memory::Device,
        }
    }

    /// The rows a copy of `width` bytes x `rows` x `depth` touches on this side. An array's
    /// rows are those of its elements in row-major order (its own pitch and height, whatever
    /// the descriptor's); all of it when its element size is not known; none for a handle
    /// this process did not make.
    fn rows(&self, width: usize, rows: usize, depth: usize) -> Vec<(u64, u64)> {
        let (base, pitch, rows_per_slice) = match (self.memory_type, self.base()) {
            (CU_MEMORYTYPE_ARRAY, _) => match arrays::find(self.array) {
                Some(array) if array.element.is_some() => (array.key, array.row as usize, array.rows as usize),
                Some(array) => return vec![array.all()],
                None => return Vec::new(),
            },
            (_, Some(base)) => (base, self.pitch, self.height.max(1)),
            (_, None) => return Vec::new(),
        };
        let start = |z: usize, y: usize| base + (((self.z + z) * rows_per_slice + self.y + y) * pitch + self.x) as u64;
        let total = rows * depth;
        if total == 0 || width == 0 {
            return Vec::new();
        }
        if total <= MAX_ROWS {
            (0..depth).flat_map(|z| (0..rows).map(move |y| (z, y))).map(|(z, y)| (start(z, y), width as u64)).collect()
        } else {
            let (first, last) = (start(0, 0), start(depth - 1, rows - 1));
            vec![(first, last + width as u64 - first)]
        }
    }
}

/// A 2D or 3D copy as its descriptor gives it: both sides and `width` bytes x `rows` x
/// `depth`.
pub struct Strided {
    src: Side,
    dst: Side,
    width: usize,
    rows: usize,
    depth: usize,
}

/// Tells the model of a 2D/3D copy (none when the descriptor was null). `sync`: the call
/// is a synchronous copy.
fn strided(call: &Call, on: StreamRef, copy: Option<Strided>, sync: bool) {
    let Some(Strided { src, dst, width, rows, depth }) = copy else { return };
    let host = if sync { synchronous(src.memory(), dst.memory()) } else { asynchronous(src.memory(), dst.memory()) };
    copied(call, on, &src.rows(width, rows, depth), &dst.rows(width, rows, depth), host);
}

impl Descriptor for Memcpy2D {
    fn strided(&self) -> Strided {
        let c = self;
        let src = Side {
            memory_type: c.src_memory_type,
            host: c.src_host as u64,
            device: c.src_device,
            array: c.src_array,
            x: c.src_x_in_bytes,
            y: c.src_y,
            z: 0,
            pitch: c.src_pitch,
            height: 0,
        };
        let dst = Side {
            memory_type: c.dst_memory_type,
            host: c.dst_host as u64,
            device: c.dst_device,
            array: c.dst_array,
            x: c.dst_x_in_bytes,
            y: c.dst_y,
            z: 0,
            pitch: c.dst_pitch,
            height: 0,
        };
        Strided { src, dst, width: c.width_in_bytes, rows: c.height, depth: 1 }
    }
}

// One handler serves the 2D, 3D and peer 3D families alike: `C` is the descriptor.
pub use {memcpy_strided as memcpy_2d, memcpy_strided as memcpy_3d, memcpy_strided as memcpy_3d_peer};

pub unsafe fn memcpy_strided<C: Descriptor>(
    call: &Call,
    real: unsafe extern "C" fn(*const C) -> CUresult,
    copy: *const C,
) -> CUresult {
    let status = unsafe { real(copy) };
    if ok(status) {
        // SAFETY: the caller's descriptor, which the driver accepted.
        strided(call, default_stream(call), unsafe { copy.as_ref() }.map(C::strided), true);
    }
    status
}

pub use {
    memcpy_strided_async as memcpy_2d_async, memcpy_strided_async as memcpy_3d_async,
    memcpy_strided_async as memcpy_3d_peer_async,
};

pub unsafe fn memcpy_strided_async<C: Descriptor>(
    call: &Call,
    real: unsafe extern "C" fn(*const C, CUstream) -> CUresult,
    copy: *const C,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(copy, h_stream) };
    if ok(status) {
        // SAFETY: the caller's descriptor, which the driver accepted.
        strided(call, stream(call, h_stream), unsafe { copy.as_ref() }.map(C::strided), false);
    }
    status
}

/// `count` linear copies in one call, on one stream.
unsafe fn batch(
    call: &Call,
    on: StreamRef,
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    count: usize,
) {
    if dsts.is_null() || srcs.is_null() || sizes.is_null() {
        return;
    }
    let mut reads = Vec::with_capacity(count);
    let mut writes = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: the caller's arrays of `count` elements, accepted by the driver.
        let (dst, src, size) = unsafe { (*dsts.add(i), *srcs.add(i), *sizes.add(i) as u64) };
        reads.push((src, size));
        writes.push((dst, size));
    }
    copied(call, on, &reads, &writes, HostEffect::None);
}

pub unsafe fn memcpy_batch_async(
    call: &Call,
    real: real::memcpy_batch_async,
    dsts: *mut CUdeviceptr,
    srcs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut CUmemcpyAttributes,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    fail_idx: *mut usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, h_stream) };
    if ok(status) {
        unsafe { batch(call, stream(call, h_stream), dsts, srcs, sizes, count) };
    }
    status
}

pub unsafe fn memcpy_batch_async_v2(
    call: &Call,
    real: real::memcpy_batch_async_v2,
    dsts: *mut CUdeviceptr,
    srcs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut CUmemcpyAttributes,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, h_stream) };
    if ok(status) {
        unsafe { batch(call, stream(call, h_stream), dsts, srcs, sizes, count) };
    }
    status
}

/// The bytes per element of a batched 3D copy: an array operand's (both arrays of an
/// array-to-array copy share it), one between pointers. None: an array whose element size is
/// not known, or that this process did not make.
fn batch_element(op: &Memcpy3DBatchOp) -> Option<u64> {
    for operand in [&op.src, &op.dst] {
        if operand.operand_type == CU_MEMCPY_OPERAND_TYPE_ARRAY {
            // SAFETY: the union's member its type names.
            return arrays::find(unsafe { operand.value.array }.array).and_then(|a| a.element);
        }
    }
    Some(1)
}

/// One operand of a batched 3D copy as a side of a strided copy of `extent` elements of
/// `element` bytes: a pointer's rows are `row_length` elements apart, its layers
/// `layer_height` rows (0: packed to the extent); an array's offset is in elements. None: a
/// pointer whose element size is not known (its rows cannot be placed), or an unknown type.
fn batch_operand(operand: &Memcpy3DOperand, element: Option<u64>, extent: [usize; 3]) -> Option<Side> {
    let packed = |given: usize, extent: usize| if given == 0 { extent } else { given };
    match operand.operand_type {
        CU_MEMCPY_OPERAND_TYPE_POINTER => {
            // SAFETY: the union's member its type names.
            let p = unsafe { operand.value.ptr };
            Some(Side {
                memory_type: CU_MEMORYTYPE_UNIFIED,
                host: 0,
                device: p.ptr,
                array: core::ptr::null_mut(),
                x: 0,
                y: 0,
                z: 0,
                pitch: packed(p.row_length, extent[0]) * element? as usize,
                height: packed(p.layer_height, extent[1]),
            })
        }
        CU_MEMCPY_OPERAND_TYPE_ARRAY => {
            // SAFETY: as above.
            let a = unsafe { operand.value.array };
            Some(Side {
                memory_type: CU_MEMORYTYPE_ARRAY,
                host: 0,
                device: 0,
                array: a.array,
                x: a.offset[0] * element.unwrap_or(0) as usize,
                y: a.offset[1],
                z: a.offset[2],
                pitch: 0,
                height: 0,
            })
        }
        _ => None,
    }
}

/// `count` 3D copies in one call, on one stream, between pointers and arrays. As for
/// `cuMemcpyBatchAsync`, no host effect.
unsafe fn batch_3d(call: &Call, on: StreamRef, ops: *const Memcpy3DBatchOp, count: usize) {
    if ops.is_null() {
        return;
    }
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for i in 0..count {
        // SAFETY: the caller's array of `count` operations, accepted by the driver.
        let op = unsafe { &*ops.add(i) };
        let element = batch_element(op);
        let [width, rows, depth] = op.extent;
        let bytes = width * element.unwrap_or(0) as usize;
        if let Some(src) = batch_operand(&op.src, element, op.extent) {
            reads.extend(src.rows(bytes, rows, depth));
        }
        if let Some(dst) = batch_operand(&op.dst, element, op.extent) {
            writes.extend(dst.rows(bytes, rows, depth));
        }
    }
    copied(call, on, &reads, &writes, HostEffect::None);
}

pub unsafe fn memcpy_3d_batch_async(
    call: &Call,
    real: real::memcpy_3d_batch_async,
    num_ops: usize,
    ops: *mut Memcpy3DBatchOp,
    fail_idx: *mut usize,
    flags: u64,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(num_ops, ops, fail_idx, flags, h_stream) };
    if ok(status) {
        unsafe { batch_3d(call, stream(call, h_stream), ops, num_ops) };
    }
    status
}

pub unsafe fn memcpy_3d_batch_async_v2(
    call: &Call,
    real: real::memcpy_3d_batch_async_v2,
    num_ops: usize,
    ops: *mut Memcpy3DBatchOp,
    flags: u64,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(num_ops, ops, flags, h_stream) };
    if ok(status) {
        unsafe { batch_3d(call, stream(call, h_stream), ops, num_ops) };
    }
    status
}
