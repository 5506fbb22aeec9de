//! Streams: creation, destruction, synchronization, event waits (queued in the model's
//! [`batch`], as records are), capture, and the wait/write-value memory operations.

use core::ffi::{c_int, c_uint};

use streamsan_driver_api::*;

use super::batch::{self, Join};
use streamsan::model::op::Origin;
use streamsan::model::streams::StreamRef;

use super::call::{handle_of, ok, origin, stream};
use super::model::{model, unsettled};
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

fn created(call: &Call, out: *mut CUstream, flags: c_uint) {
    if !out.is_null() {
        let handle = unsafe { *out } as u64;
        model().stream_created(handle, driver::current_context(), flags & CU_STREAM_NON_BLOCKING != 0, &origin(call));
    }
}

pub unsafe fn stream_create(call: &Call, real: real::stream_create, out: *mut CUstream, flags: c_uint) -> CUresult {
    let status = unsafe { real(out, flags) };
    if ok(status) {
        created(call, out, flags);
    }
    status
}

pub unsafe fn stream_create_with_priority(
    call: &Call,
    real: real::stream_create_with_priority,
    out: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    let status = unsafe { real(out, flags, priority) };
    if ok(status) {
        created(call, out, flags);
    }
    status
}

pub unsafe fn stream_destroy(call: &Call, real: real::stream_destroy, h_stream: CUstream) -> CUresult {
    let status = unsafe { real(h_stream) };
    if ok(status) {
        model().stream_destroyed(h_stream as u64, &origin(call));
        super::programmatic::stream_destroyed(h_stream as u64);
    }
    status
}

/// `cuStreamSetAttribute`: of its attributes, programmatic stream serialization bears on
/// ordering (every later launch on the stream has it, [`super::programmatic`]).
pub unsafe fn stream_set_attribute(
    call: &Call,
    real: real::stream_set_attribute,
    h_stream: CUstream,
    attr: u32,
    value: *const c_void,
) -> CUresult {
    let status = unsafe { real(h_stream, attr, value) };
    if ok(status) && attr == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION && !value.is_null() {
        // SAFETY: the driver read the attribute's value, whose first member is this flag.
        let on = unsafe { *(value as *const c_int) } != 0;
        super::programmatic::stream_set(handle_of(stream(call, h_stream)), on);
    }
    status
}

// `cuStreamQuery` returning success means the stream's work is done: as a synchronize.
pub use stream_synchronize as stream_query;

/// `cuStreamSynchronize`: the host joins the stream (queued in the model's batch after the
/// work it waited for).
pub unsafe fn stream_synchronize(call: &Call, real: real::stream_synchronize, h_stream: CUstream) -> CUresult {
    let status = unsafe { real(h_stream) };
    if ok(status) {
        super::load_gate::synchronized(Some(h_stream.cast()));
        batch::join(unsettled(), Join::Stream(stream(call, h_stream)));
        super::footprint::collect();
    }
    status
}

pub unsafe fn stream_wait_event(
    call: &Call,
    real: real::stream_wait_event,
    h_stream: CUstream,
    event: CUevent,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, event, flags) };
    if ok(status) {
        super::peers::refresh(unsettled(), event as u64);
        batch::wait(unsettled(), stream(call, h_stream), event as u64, origin(call));
    }
    status
}

pub unsafe fn stream_begin_capture_v1(
    call: &Call,
    real: real::stream_begin_capture_v1,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(h_stream) };
    if ok(status) {
        super::load_gate::capture_began(h_stream.cast(), 0);
        model().capture_begin(stream(call, h_stream));
    }
    status
}

pub unsafe fn stream_begin_capture(
    call: &Call,
    real: real::stream_begin_capture,
    h_stream: CUstream,
    mode: u32,
) -> CUresult {
    let status = unsafe { real(h_stream, mode) };
    if ok(status) {
        super::load_gate::capture_began(h_stream.cast(), mode);
        model().capture_begin(stream(call, h_stream));
    }
    status
}

/// The capture ends whatever the status; on success it made a graph.
pub unsafe fn stream_end_capture(
    call: &Call,
    real: real::stream_end_capture,
    h_stream: CUstream,
    graph: *mut CUgraph,
) -> CUresult {
    let status = unsafe { real(h_stream, graph) };
    super::load_gate::capture_ended(h_stream.cast());
    let made = (ok(status) && !graph.is_null()).then(|| unsafe { *graph } as u64).filter(|&g| g != 0);
    model().capture_end(stream(call, h_stream), made);
    status
}

// One handler serves the 32- and 64-bit families alike: `V` is the value.
pub use {wait_value as stream_wait_value_32, wait_value as stream_wait_value_64};
pub use {write_value as stream_write_value_32, write_value as stream_write_value_64};

/// The stream waits for a value at `addr`: it is ordered after the last value written there.
pub unsafe fn wait_value<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUstream, CUdeviceptr, V, c_uint) -> CUresult,
    h_stream: CUstream,
    addr: CUdeviceptr,
    value: V,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, addr, value, flags) };
    if ok(status) {
        super::load_gate::waits(h_stream.cast());
        model().wait_value(stream(call, h_stream), addr, &origin(call));
    }
    status
}

/// The stream writes a value of `V`'s size at `addr`.
pub unsafe fn write_value<V>(
    call: &Call,
    real: unsafe extern "C" fn(CUstream, CUdeviceptr, V, c_uint) -> CUresult,
    h_stream: CUstream,
    addr: CUdeviceptr,
    value: V,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, addr, value, flags) };
    if ok(status) {
        model().write_value(stream(call, h_stream), addr, size_of::<V>() as u64, &origin(call));
    }
    status
}

/// A batch of wait and write operations, each as its own call.
pub unsafe fn stream_batch_mem_op(
    call: &Call,
    real: real::stream_batch_mem_op,
    h_stream: CUstream,
    count: c_uint,
    params: *mut BatchMemOpParams,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, count, params, flags) };
    if ok(status) && !params.is_null() {
        let on = stream(call, h_stream);
        for i in 0..count as usize {
            // SAFETY: `count` operations, accepted by the driver.
            let op = unsafe { *params.add(i) };
            match op.operation {
                CU_STREAM_MEM_OP_WAIT_VALUE_32 | CU_STREAM_MEM_OP_WAIT_VALUE_64 => {
                    super::load_gate::waits(h_stream.cast());
                    model().wait_value(on, op.address, &origin(call))
                }
                CU_STREAM_MEM_OP_WRITE_VALUE_32 => model().write_value(on, op.address, 4, &origin(call)),
                CU_STREAM_MEM_OP_WRITE_VALUE_64 => model().write_value(on, op.address, 8, &origin(call)),
                _ => {}
            }
        }
    }
    status
}

/// After an external-semaphore call: if the driver succeeded, `tell` for each semaphore, on
/// the call's stream.
unsafe fn each_semaphore(
    call: &Call,
    status: CUresult,
    sems: *const CUexternalSemaphore,
    count: c_uint,
    h_stream: CUstream,
    tell: impl Fn(StreamRef, u64, &Origin),
) -> CUresult {
    if ok(status) && !sems.is_null() {
        // SAFETY: `count` handles, accepted by the driver.
        for &sem in unsafe { core::slice::from_raw_parts(sems, count as usize) } {
            tell(stream(call, h_stream), sem as u64, &origin(call));
        }
    }
    status
}

/// `cuSignalExternalSemaphoresAsync`: each semaphore is signalled after the stream's work so
/// far, as an event recorded there.
pub unsafe fn signal_external_semaphores(
    call: &Call,
    real: real::signal_external_semaphores,
    sems: *const CUexternalSemaphore,
    params: *const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS,
    count: c_uint,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(sems, params, count, h_stream) };
    let record = |on, sem, origin: &Origin| model().event_record(sem, on, false, origin);
    unsafe { each_semaphore(call, status, sems, count, h_stream, record) }
}

/// `cuWaitExternalSemaphoresAsync`: the stream waits for each semaphore's last signal, as on
/// an event. A semaphore this process never signalled (Vulkan did, or another process) orders
/// nothing and is noted as a wait on an unrecorded event.
pub unsafe fn wait_external_semaphores(
    call: &Call,
    real: real::wait_external_semaphores,
    sems: *const CUexternalSemaphore,
    params: *const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
    count: c_uint,
    h_stream: CUstream,
) -> CUresult {
    let status = unsafe { real(sems, params, count, h_stream) };
    if ok(status) {
        super::load_gate::waits(h_stream.cast());
    }
    let wait = |on, sem, origin: &Origin| model().stream_wait_event(on, sem, origin);
    unsafe { each_semaphore(call, status, sems, count, h_stream, wait) }
}
