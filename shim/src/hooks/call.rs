//! What every hook reads of the call it intercepts: whether the driver accepted it, the call
//! as the model names it (entry point, thread, call site), and the stream a handle names at
//! its entry point. Below every API family's hooks, which all use it.

use streamsan::model::op::{Origin, StackId};
use streamsan::model::streams::StreamRef;
use streamsan::phases::{self, Phase};
use streamsan_driver_api::*;

use crate::intercept::driver;
use crate::intercept::variants::Call;
use crate::sites::{stack, thread};

/// Whether the driver accepted the call.
#[inline]
pub(super) fn ok(status: CUresult) -> bool {
    status == CUDA_SUCCESS
}

/// The call as the model names it: entry point, thread, call site.
pub(super) fn origin(call: &Call) -> Origin {
    origin_with(call, || phases::time(Phase::CallSite, stack::capture))
}

/// The call as the model names it, its call site from `site`: none for a launch when a
/// program measuring the shim left the capture out
/// ([`crate::intercept::experiments::NO_CAPTURE`]).
#[inline(always)]
pub(super) fn origin_with(call: &Call, site: impl FnOnce() -> StackId) -> Origin {
    Origin { api: call.name(), thread: thread::current(), site: site() }
}

/// The stream a handle names at this entry point: handle 0 is the legacy default stream,
/// or, at a `_ptsz`/`_ptds` entry point, the calling thread's per-thread default stream.
pub(super) fn stream(call: &Call, handle: CUstream) -> StreamRef {
    stream_of_handle(handle, call.per_thread())
}

/// The stream a handle names; `per_thread`: handle 0 is the per-thread default stream.
pub(super) fn stream_of_handle(handle: CUstream, per_thread: bool) -> StreamRef {
    match handle as usize {
        0 if per_thread => per_thread_stream(),
        0 | CU_STREAM_LEGACY => StreamRef::Legacy { ctx: driver::current_context() },
        CU_STREAM_PER_THREAD => per_thread_stream(),
        h => StreamRef::Handle(h as u64),
    }
}

/// The handle the driver knows `stream` by on the calling thread: [`stream_of_handle`]'s
/// inverse.
pub(super) fn handle_of(stream: StreamRef) -> u64 {
    match stream {
        StreamRef::Legacy { .. } => CU_STREAM_LEGACY as u64,
        StreamRef::PerThread { .. } => CU_STREAM_PER_THREAD as u64,
        StreamRef::Handle(handle) => handle,
    }
}

fn per_thread_stream() -> StreamRef {
    StreamRef::PerThread { ctx: driver::current_context(), thread: thread::current() }
}

/// The stream of an entry point that takes none: the default stream it runs on.
pub(super) fn default_stream(call: &Call) -> StreamRef {
    stream(call, core::ptr::null_mut())
}
