//! Memory and events shared between processes through CUDA IPC (`docs/semantics.md#ipc`):
//! exported handles make memory shared and events published ([`super::peers`]); opened
//! handles name what another process of the run exported, or are noted when none did.

use core::ffi::c_uint;

use streamsan::model::buffers::MemoryKind;
use streamsan_driver_api::*;

use super::call::{ok, origin};
use super::memory::{allocated, freeing, out, synchronous};
use super::model::model;
use super::peers;
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// The 64 bytes of an IPC handle or of a pool pointer's export data.
fn bytes(handle: &IpcMemHandle) -> &[u8] {
    &handle.reserved
}

/// Reads the 64 bytes at `data` (a pool pointer's export data).
///
/// # Safety
/// `data` is null or points to 64 readable bytes.
unsafe fn export_data(data: *const CUmemPoolPtrExportData) -> Option<IpcMemHandle> {
    // SAFETY: the caller's 64 bytes, as the driver wrote or read them.
    (!data.is_null()).then(|| unsafe { *data.cast::<IpcMemHandle>() })
}

/// Memory exported at `ptr`: shared from now on, as many bytes as its allocation holds
/// from there.
fn exported(handle: &IpcMemHandle, ptr: CUdeviceptr) {
    if let Some(size) = driver::allocation_size(ptr) {
        peers::exported_memory(model(), bytes(handle), ptr, size);
    }
}

/// Memory opened at `base` from `handle`: a buffer (the driver does not say its size, so it
/// is asked, `cuMemGetAddressRange`), shared with the process that exported it, or noted
/// when no process of the run did.
fn opened(call: &Call, handle: &IpcMemHandle, base: u64) {
    let Some(size) = driver::allocation_size(base) else { return };
    allocated(call, base, size, MemoryKind::Imported, None);
    if !peers::opened_memory(model(), bytes(handle), base) {
        model().opened_unseen(base, &origin(call));
    }
}

pub unsafe fn ipc_get_mem_handle(
    _call: &Call,
    real: real::ipc_get_mem_handle,
    handle: *mut IpcMemHandle,
    dptr: CUdeviceptr,
) -> CUresult {
    let status = unsafe { real(handle, dptr) };
    if ok(status) {
        // SAFETY: the driver wrote the handle.
        exported(unsafe { &*handle }, dptr);
    }
    status
}

pub unsafe fn ipc_open_mem_handle(
    call: &Call,
    real: real::ipc_open_mem_handle,
    pdptr: *mut CUdeviceptr,
    handle: IpcMemHandle,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(pdptr, handle, flags) };
    if ok(status) {
        opened(call, &handle, unsafe { out(pdptr) });
    }
    status
}

/// `cuIpcCloseMemHandle`: the mapping goes, like a synchronous free.
pub unsafe fn ipc_close_mem_handle(call: &Call, real: real::ipc_close_mem_handle, dptr: CUdeviceptr) -> CUresult {
    freeing(call, dptr, synchronous());
    unsafe { real(dptr) }
}

pub unsafe fn mem_pool_export_pointer(
    _call: &Call,
    real: real::mem_pool_export_pointer,
    share_data: *mut CUmemPoolPtrExportData,
    ptr: CUdeviceptr,
) -> CUresult {
    let status = unsafe { real(share_data, ptr) };
    if let (true, Some(data)) = (ok(status), unsafe { export_data(share_data) }) {
        exported(&data, ptr);
    }
    status
}

/// `cuMemPoolImportPointer`: freed later with `cuMemFree` or `cuMemFreeAsync`, as usual.
pub unsafe fn mem_pool_import_pointer(
    call: &Call,
    real: real::mem_pool_import_pointer,
    ptr_out: *mut CUdeviceptr,
    pool: CUmemoryPool,
    share_data: *mut CUmemPoolPtrExportData,
) -> CUresult {
    let status = unsafe { real(ptr_out, pool, share_data) };
    if let (true, Some(data)) = (ok(status), unsafe { export_data(share_data) }) {
        opened(call, &data, unsafe { out(ptr_out) });
    }
    status
}

/// `cuIpcGetEventHandle`: the event's records are published from now on.
pub unsafe fn ipc_get_event_handle(
    _call: &Call,
    real: real::ipc_get_event_handle,
    handle: *mut IpcEventHandle,
    event: CUevent,
) -> CUresult {
    let status = unsafe { real(handle, event) };
    if ok(status) {
        // SAFETY: the driver wrote the handle.
        peers::exported_event(model(), bytes(unsafe { &*handle }), event as u64);
    }
    status
}

/// `cuIpcOpenEventHandle`: a wait on the event opened joins its last record in the process
/// that exported it ([`peers::refresh`]).
pub unsafe fn ipc_open_event_handle(
    call: &Call,
    real: real::ipc_open_event_handle,
    ph_event: *mut CUevent,
    handle: IpcEventHandle,
) -> CUresult {
    let status = unsafe { real(ph_event, handle) };
    if ok(status) && !ph_event.is_null() {
        // SAFETY: the driver wrote the event.
        let event = unsafe { *ph_event } as u64;
        if !peers::opened_event(model(), bytes(&handle), event) {
            model().opened_unseen(event, &origin(call));
        }
    }
    status
}
