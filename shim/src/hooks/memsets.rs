//! Memsets: the bytes they write. A synchronous memset of pinned host or managed memory
//! makes the host wait for it; of device memory, it does not.

use core::ffi::{c_uchar, c_uint, c_ushort};

use streamsan::model::buffers::MemoryKind;
use streamsan::model::op::{Access, HostEffect, Mode};
use streamsan::model::streams::StreamRef;
use streamsan::model::Work;
use streamsan::phases::Phase;
use streamsan_driver_api::*;

use super::batch;
use super::call::{default_stream, ok, origin, stream};
use super::copies::MAX_ROWS;
use super::model::{unsettled, with_accesses};
use crate::intercept::variants::{real, Call};

/// A memset of `rows` rows of `row_bytes` bytes, `pitch` apart, from `dst`.
fn set(call: &Call, on: StreamRef, dst: u64, pitch: usize, row_bytes: usize, rows: usize, synchronous: bool) {
    if dst == 0 || row_bytes == 0 || rows == 0 {
        return;
    }
    let origin = origin(call);
    let model = unsettled();
    let host_memory = matches!(model.memory_kind(dst), Some(k) if k.is_host() || k == MemoryKind::Managed);
    let host = if synchronous && host_memory { HostEffect::WaitsForOperation } else { HostEffect::None };
    with_accesses(|accesses| {
        push_set_accesses(accesses, dst, pitch, row_bytes, rows);
        batch::queue(model, on, Work { origin, kernel: None, accesses, host }, Phase::MemsetModel);
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

pub unsafe fn memset_d8(
    call: &Call,
    real: real::memset_d8,
    dst: CUdeviceptr,
    value: c_uchar,
    count: usize,
) -> CUresult {
    let status = unsafe { real(dst, value, count) };
    if ok(status) {
        set(call, default_stream(call), dst, 0, count, 1, true);
    }
    status
}

pub unsafe fn memset_d16(
    call: &Call,
    real: real::memset_d16,
    dst: CUdeviceptr,
    value: c_ushort,
    count: usize,
) -> CUresult {
    let status = unsafe { real(dst, value, count) };
    if ok(status) {
        set(call, default_stream(call), dst, 0, count * 2, 1, true);
    }
    status
}

pub unsafe fn memset_d32(
    call: &Call,
    real: real::memset_d32,
    dst: CUdeviceptr,
    value: c_uint,
    count: usize,
) -> CUresult {
    let status = unsafe { real(dst, value, count) };
    if ok(status) {
        set(call, default_stream(call), dst, 0, count * 4, 1, true);
    }
    status
}

pub unsafe fn memset_d2d8(
    call: &Call,
    real: real::memset_d2d8,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uchar,
    width: usize,
    height: usize,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height) };
    if ok(status) {
        set(call, default_stream(call), dst, pitch, width, height, true);
    }
    status
}

pub unsafe fn memset_d2d16(
    call: &Call,
    real: real::memset_d2d16,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_ushort,
    width: usize,
    height: usize,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height) };
    if ok(status) {
        set(call, default_stream(call), dst, pitch, width * 2, height, true);
    }
    status
}

pub unsafe fn memset_d2d32(
    call: &Call,
    real: real::memset_d2d32,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uint,
    width: usize,
    height: usize,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height) };
    if ok(status) {
        set(call, default_stream(call), dst, pitch, width * 4, height, true);
    }
    status
}

pub unsafe fn memset_d8_async(
    call: &Call,
    real: real::memset_d8_async,
    dst: CUdeviceptr,
    value: c_uchar,
    count: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, value, count, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, 0, count, 1, false);
    }
    status
}

pub unsafe fn memset_d16_async(
    call: &Call,
    real: real::memset_d16_async,
    dst: CUdeviceptr,
    value: c_ushort,
    count: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, value, count, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, 0, count * 2, 1, false);
    }
    status
}

pub unsafe fn memset_d32_async(
    call: &Call,
    real: real::memset_d32_async,
    dst: CUdeviceptr,
    value: c_uint,
    count: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, value, count, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, 0, count * 4, 1, false);
    }
    status
}

pub unsafe fn memset_d2d8_async(
    call: &Call,
    real: real::memset_d2d8_async,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uchar,
    width: usize,
    height: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, pitch, width, height, false);
    }
    status
}

pub unsafe fn memset_d2d16_async(
    call: &Call,
    real: real::memset_d2d16_async,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_ushort,
    width: usize,
    height: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, pitch, width * 2, height, false);
    }
    status
}

pub unsafe fn memset_d2d32_async(
    call: &Call,
    real: real::memset_d2d32_async,
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uint,
    width: usize,
    height: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dst, pitch, value, width, height, h_stream) };
    if ok(status) {
        set(call, stream(call, h_stream), dst, pitch, width * 4, height, false);
    }
    status
}
