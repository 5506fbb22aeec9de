//! Memsets: the bytes they write. A synchronous memset of pinned host or managed memory
//! makes the host wait for it; of device memory, it does not.

use streamsan::model::op::{Access, HostEffect, Mode};
use streamsan::model::streams::StreamRef;
use streamsan::model::Work;
use streamsan::phases::Phase;
use streamsan_driver_api::*;

use super::call::{default_stream, ok, origin, stream};
use super::copies::MAX_ROWS;
use super::host_reach;
use super::model::{unsettled, with_accesses};
use crate::intercept::variants::Call;

/// A memset of `rows` rows of `row_bytes` bytes, `pitch` apart, from `dst`.
fn set(call: &Call, on: StreamRef, dst: u64, pitch: usize, row_bytes: usize, rows: usize, synchronous: bool) {
    if dst == 0 || row_bytes == 0 || rows == 0 {
        return;
    }
    let origin = origin(call);
    let model = unsettled();
    let host_memory = model.memory_kind(dst).is_some_and(|k| k.host_reachable());
    let host = if synchronous && host_memory { HostEffect::WaitsForOperation } else { HostEffect::None };
    with_accesses(|accesses| {
        push_set_accesses(accesses, dst, pitch, row_bytes, rows);
        host_reach::queue(model, on, Work { origin, kernel: None, accesses, host }, Phase::MemsetModel, &[]);
    });
    // A memset that orders the host completed what the host waited for: measured
    // footprints can be read (a phase of its own).
    if host != HostEffect::None {
        super::footprint::collect();
    }
}

/// What a memset of `rows` rows of `row_bytes` bytes, `pitch` apart, from `dst` writes (a
/// graph's memset node too).
pub(super) fn push_set_accesses(out: &mut Vec<Access>, dst: u64, pitch: usize, row_bytes: usize, rows: usize) {
    if dst == 0 || row_bytes == 0 || rows == 0 {
        return;
    }
    if rows <= MAX_ROWS {
        out.extend((0..rows).map(|r| Access::new(dst + (r * pitch) as u64, row_bytes as u64, Mode::Write)));
    } else {
        out.push(Access::new(dst, ((rows - 1) * pitch + row_bytes) as u64, Mode::Write));
    }
}

// One handler per shape serves the 8-, 16- and 32-bit families alike: `V` is the element.
pub use {memset as memset_d8, memset as memset_d16, memset as memset_d32};

/// `count` elements from `dst`.
pub unsafe fn memset<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUdeviceptr, V, usize) -> CUresult,
    dst: CUdeviceptr,
    value: V,
    count: usize,
) -> CUresult {
    let status = unsafe { real(dst, value, count) };
    if ok(status) {
        set(call, default_stream(call), dst, 0, count * size_of::<V>(), 1, true);
    }
    status
}

pub use {memset_2d as memset_d2d8, memset_2d as memset_d2d16, memset_2d as memset_d2d32};

/// `height` rows of `width` elements, `pitch` bytes apart, from `dst`.
pub unsafe fn memset_2d<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUdeviceptr, usize, V, usize, usize) -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    value: V,
    width: usize,
    height: usize,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height) };
    if ok(status) {
        set(call, default_stream(call), dst, pitch, width * size_of::<V>(), height, true);
    }
    status
}

pub use {memset_async as memset_d8_async, memset_async as memset_d16_async, memset_async as memset_d32_async};

pub unsafe fn memset_async<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUdeviceptr, V, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    value: V,
    count: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, value, count, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, 0, count * size_of::<V>(), 1, false);
    }
    status
}

pub use {
    memset_2d_async as memset_d2d8_async, memset_2d_async as memset_d2d16_async, memset_2d_async as memset_d2d32_async,
};

pub unsafe fn memset_2d_async<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUdeviceptr, usize, V, usize, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    value: V,
    width: usize,
    height: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, pitch, width * size_of::<V>(), height, false);
    }
    status
}
