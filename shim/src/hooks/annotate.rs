//! The annotation API (`include/streamsan.h`): memory the driver does not see allocated,
//! declared by the program or its framework.

use core::ffi::{c_int, c_void};

use streamsan::model::buffers::MemoryKind;
use streamsan::model::op::Origin;
use streamsan::model::{Alloc, FreeOn};
use streamsan_driver_api::CUstream;

use super::call::stream_of_handle;
use super::model::model;
use crate::intercept::{driver, first_call};
use crate::sites::{stack, thread};

fn origin(api: &'static str) -> Origin {
    Origin { api, thread: thread::current(), site: stack::capture() }
}

/// Declares `size` bytes at `ptr`, allocated on `stream` (or synchronously).
///
/// # Safety
/// Reads nothing through its arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamsan_annotate_alloc(
    ptr: *const c_void,
    size: usize,
    stream: CUstream,
    synchronous: c_int,
) {
    if ptr.is_null() {
        return;
    }
    first_call::enter();
    let alloc =
        Alloc { base: ptr as u64, size: size as u64, kind: MemoryKind::Annotated, ctx: driver::current_context() };
    let on = (synchronous == 0).then(|| stream_of_handle(stream, false));
    model().alloc(alloc, on, &origin("streamsan_annotate_alloc"));
}

/// Declares the block at `ptr` freed on `stream` (or synchronously).
///
/// # Safety
/// Reads nothing through its arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamsan_annotate_free(ptr: *const c_void, stream: CUstream, synchronous: c_int) {
    if ptr.is_null() {
        return;
    }
    first_call::enter();
    let on = if synchronous != 0 {
        FreeOn::Synchronous { ctx: driver::current_context() }
    } else {
        FreeOn::Stream(stream_of_handle(stream, false))
    };
    model().free(ptr as u64, on, &origin("streamsan_annotate_free"));
}
