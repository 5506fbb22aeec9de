//! Allocations and frees (SEMANTICS.md, "Buffers and accesses").

use core::ffi::{c_uint, c_void};

use streamsan::model::buffers::MemoryKind;
use streamsan::model::streams::StreamRef;
use streamsan::model::{Alloc, FreeOn};
use streamsan_driver_api::*;

use super::{ok, origin, stream};
use crate::driver;
use crate::exports::Call;
use crate::runtime::model;

/// A successful allocation of `size` bytes at `base`: synchronous, or ordered on `on`.
fn allocated(call: &Call, base: u64, size: u64, kind: MemoryKind, on: Option<StreamRef>) {
    if base == 0 {
        return;
    }
    let alloc = Alloc { base, size, kind, ctx: driver::current_context() };
    model().alloc(alloc, on, &origin(call));
}

/// A free, told to the model before the driver frees (see the module of handlers).
fn freeing(call: &Call, base: u64, on: FreeOn) {
    if base != 0 {
        model().free(base, on, &origin(call));
    }
}

fn synchronous() -> FreeOn {
    FreeOn::Synchronous { ctx: driver::current_context() }
}

/// Reads an out-parameter the driver wrote.
unsafe fn out<T: Copy + Into<u64>>(p: *mut T) -> u64 {
    if p.is_null() { 0 } else { unsafe { *p }.into() }
}

unsafe fn out_ptr(p: *mut *mut c_void) -> u64 {
    if p.is_null() { 0 } else { (unsafe { *p }) as u64 }
}

pub unsafe fn mem_alloc(call: &Call, real: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult, dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    let status = unsafe { real(dptr, bytesize) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::Device, None);
    }
    status
}

pub unsafe fn mem_alloc_pitch(
    call: &Call,
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, c_uint) -> CUresult,
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

pub unsafe fn mem_alloc_managed(call: &Call, real: unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CUresult, dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) -> CUresult {
    let status = unsafe { real(dptr, bytesize, flags) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::Managed, None);
    }
    status
}

pub unsafe fn mem_alloc_host(call: &Call, real: unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult, pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    let status = unsafe { real(pp, bytesize) };
    if ok(status) {
        allocated(call, unsafe { out_ptr(pp) }, bytesize as u64, MemoryKind::PinnedHost, None);
    }
    status
}

pub unsafe fn mem_host_alloc(call: &Call, real: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult, pp: *mut *mut c_void, bytesize: usize, flags: c_uint) -> CUresult {
    let status = unsafe { real(pp, bytesize, flags) };
    if ok(status) {
        allocated(call, unsafe { out_ptr(pp) }, bytesize as u64, MemoryKind::PinnedHost, None);
    }
    status
}

pub unsafe fn mem_host_register(call: &Call, real: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult, p: *mut c_void, bytesize: usize, flags: c_uint) -> CUresult {
    let status = unsafe { real(p, bytesize, flags) };
    if ok(status) {
        allocated(call, p as u64, bytesize as u64, MemoryKind::RegisteredHost, None);
    }
    status
}

pub unsafe fn mem_host_unregister(call: &Call, real: unsafe extern "C" fn(*mut c_void) -> CUresult, p: *mut c_void) -> CUresult {
    freeing(call, p as u64, synchronous());
    unsafe { real(p) }
}

pub unsafe fn mem_free(call: &Call, real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    freeing(call, dptr, synchronous());
    unsafe { real(dptr) }
}

pub unsafe fn mem_free_host(call: &Call, real: unsafe extern "C" fn(*mut c_void) -> CUresult, p: *mut c_void) -> CUresult {
    freeing(call, p as u64, synchronous());
    unsafe { real(p) }
}

pub unsafe fn mem_alloc_async(call: &Call, real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult, dptr: *mut CUdeviceptr, bytesize: usize, h_stream: CUstream) -> CUresult {
    let status = unsafe { real(dptr, bytesize, h_stream) };
    if ok(status) {
        allocated(call, unsafe { out(dptr) }, bytesize as u64, MemoryKind::StreamOrdered, Some(stream(call, h_stream)));
    }
    status
}

pub unsafe fn mem_alloc_from_pool_async(
    call: &Call,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult,
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

pub unsafe fn mem_free_async(call: &Call, real: unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult, dptr: CUdeviceptr, h_stream: CUstream) -> CUresult {
    freeing(call, dptr, FreeOn::Stream(stream(call, h_stream)));
    unsafe { real(dptr, h_stream) }
}

/// `cuMemMap`: the range becomes memory (the handle from `cuMemCreate` is only its backing).
pub unsafe fn mem_map(
    call: &Call,
    real: unsafe extern "C" fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, u64) -> CUresult,
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
pub unsafe fn mem_unmap(call: &Call, real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult, ptr: CUdeviceptr, size: usize) -> CUresult {
    freeing(call, ptr, synchronous());
    unsafe { real(ptr, size) }
}
