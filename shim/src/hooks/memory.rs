//! Allocations and frees (`docs/semantics.md#allocation-and-free`).

use core::ffi::{c_uint, c_void};

use streamsan::model::buffers::MemoryKind;
use streamsan::model::streams::StreamRef;
use streamsan::model::{Alloc, FreeOn};
use streamsan_driver_api::*;

use super::call::{ok, origin, stream};
use super::model::model;
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// A successful allocation of `size` bytes at `base`: synchronous, or ordered on `on`.
pub(super) fn allocated(call: &Call, base: u64, size: u64, kind: MemoryKind, on: Option<StreamRef>) {
    if base == 0 {
        return;
    }
    let alloc = Alloc { base, size, kind, ctx: driver::current_context() };
    model().alloc(alloc, on, &origin(call));
}

/// A free, told to the model before the driver frees (see the module of handlers).
pub(super) fn freeing(call: &Call, base: u64, on: FreeOn) {
    if base != 0 {
        model().free(base, on, &origin(call));
    }
}

pub(super) fn synchronous() -> FreeOn {
    FreeOn::Synchronous { ctx: driver::current_context() }
}

/// Reads an out-parameter the driver wrote.
pub(super) unsafe fn out<T: Copy + Into<u64>>(p: *mut T) -> u64 {
    if p.is_null() {
        0
    } else {
        unsafe { *p }.into()
    }
}

unsafe fn out_ptr(p: *mut *mut c_void) -> u64 {
    if p.is_null() {
        0
    } else {
        (unsafe { *p }) as u64
    }
}

pub unsafe fn mem_alloc(call: &Call, real: real::mem_alloc, dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    let status = unsafe { real(dptr, bytesize) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::Device, None);
    }
    status
}

pub unsafe fn mem_alloc_pitch(
    call: &Call,
    real: real::mem_alloc_pitch,
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width_in_bytes: usize,
    height: usize,
    element_size_bytes: c_uint,
) -> CUresult {
    let status = unsafe { real(dptr, pitch, width_in_bytes, height, element_size_bytes) };
    if ok(status) {
        let rows = if pitch.is_null() { width_in_bytes } else { unsafe { *pitch } };
        allocated(call, unsafe { out(dptr) }, (rows * height) as u64, MemoryKind::Device, None);
    }
    status
}

pub unsafe fn mem_alloc_managed(
    call: &Call,
    real: real::mem_alloc_managed,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(dptr, bytesize, flags) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::Managed, None);
    }
    status
}

pub unsafe fn mem_alloc_host(
    call: &Call,
    real: real::mem_alloc_host,
    pp: *mut *mut c_void,
    bytesize: usize,
) -> CUresult {
    let status = unsafe { real(pp, bytesize) };
    if ok(status) {
        allocated(call, unsafe { out_ptr(pp) }, bytesize as u64, MemoryKind::PinnedHost, None);
    }
    status
}

pub unsafe fn mem_host_alloc(
    call: &Call,
    real: real::mem_host_alloc,
    pp: *mut *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(pp, bytesize, flags) };
    if ok(status) {
        allocated(call, unsafe { out_ptr(pp) }, bytesize as u64, MemoryKind::PinnedHost, None);
    }
    status
}

pub unsafe fn mem_host_register(
    call: &Call,
    real: real::mem_host_register,
    p: *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(p, bytesize, flags) };
    if ok(status) {
        allocated(call, p as u64, bytesize as u64, MemoryKind::RegisteredHost, None);
    }
    status
}

pub unsafe fn mem_host_unregister(call: &Call, real: real::mem_host_unregister, p: *mut c_void) -> CUresult {
    freeing(call, p as u64, synchronous());
    unsafe { real(p) }
}

pub unsafe fn mem_free(call: &Call, real: real::mem_free, dptr: CUdeviceptr) -> CUresult {
    freeing(call, dptr, synchronous());
    unsafe { real(dptr) }
}

pub unsafe fn mem_free_host(call: &Call, real: real::mem_free_host, p: *mut c_void) -> CUresult {
    freeing(call, p as u64, synchronous());
    unsafe { real(p) }
}

pub unsafe fn mem_alloc_async(
    call: &Call,
    real: real::mem_alloc_async,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dptr, bytesize, h_stream) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::StreamOrdered, Some(stream(call, h_stream)));
    }
    status
}

/// `cuMemAllocFromPoolAsync`: a stream-ordered allocation from the given pool.
pub unsafe fn mem_alloc_from_pool_async(
    call: &Call,
    real: real::mem_alloc_from_pool_async,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    pool: CUmemoryPool,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(dptr, bytesize, pool, h_stream) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::StreamOrdered, Some(stream(call, h_stream)));
    }
    status
}

pub unsafe fn mem_free_async(
    call: &Call,
    real: real::mem_free_async,
    dptr: CUdeviceptr,
    h_stream: CUstream,
) -> CUresult {
    freeing(call, dptr, FreeOn::Stream(stream(call, h_stream)));
    unsafe { real(dptr, h_stream) }
}

/// `cuMemMap`: the range becomes memory (the handle from `cuMemCreate` is only its backing).
pub unsafe fn mem_map(
    call: &Call,
    real: real::mem_map,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: u64,
) -> CUresult {
    let status = unsafe { real(ptr, size, offset, handle, flags) };
    if ok(status) {
        allocated(call, ptr, size as u64, MemoryKind::Mapped, None);
    }
    status
}

/// `cuMemUnmap`: the range stops being memory, like a synchronous free.
pub unsafe fn mem_unmap(call: &Call, real: real::mem_unmap, ptr: CUdeviceptr, size: usize) -> CUresult {
    freeing(call, ptr, synchronous());
    unsafe { real(ptr, size) }
}
