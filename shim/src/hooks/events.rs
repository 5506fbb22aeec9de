//! Events: records, waits (in [`super::streams`]), host synchronization, destruction.
//! Records, waits and the host's joins wait in the model's [`batch`] with the launches
//! around them; an IPC event's are also told to the other processes ([`peers`]).

use core::ffi::c_uint;

use streamsan_driver_api::*;

use super::batch::{self, Join};
use super::call::{ok, origin, stream};
use super::model::{model, unsettled};
use super::peers;
use crate::intercept::variants::{real, Call};

pub unsafe fn event_record(call: &Call, real: real::event_record, event: CUevent, h_stream: CUstream) -> CUresult {
    let status = unsafe { real(event, h_stream) };
    if ok(status) {
        batch::record(unsettled(), event as u64, stream(call, h_stream), false, origin(call));
        peers::recorded(unsettled(), event as u64);
    }
    status
}

pub unsafe fn event_record_with_flags(
    call: &Call,
    real: real::event_record_with_flags,
    event: CUevent,
    h_stream: CUstream,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(event, h_stream, flags) };
    if ok(status) {
        let external = flags & CU_EVENT_RECORD_EXTERNAL != 0;
        batch::record(unsettled(), event as u64, stream(call, h_stream), external, origin(call));
        peers::recorded(unsettled(), event as u64);
    }
    status
}

// `cuEventQuery` returning success means the event completed: as a synchronize.
pub use event_synchronize as event_query;

/// `cuEventSynchronize`: the host joins the event (queued in the model's batch after the
/// record it waited for).
pub unsafe fn event_synchronize(_call: &Call, real: real::event_synchronize, event: CUevent) -> CUresult {
    let status = unsafe { real(event) };
    if ok(status) {
        peers::refresh(unsettled(), event as u64);
        batch::join(unsettled(), Join::Event(event as u64));
        super::footprint::collect();
    }
    status
}

pub unsafe fn event_destroy(_call: &Call, real: real::event_destroy, event: CUevent) -> CUresult {
    let status = unsafe { real(event) };
    if ok(status) {
        model().event_destroyed(event as u64);
    }
    status
}
