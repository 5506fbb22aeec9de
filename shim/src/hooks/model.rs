//! The happens-before model of this process, which the handlers tell what calls did: made on
//! first use, its races kept until the process life installs their sink ([`install_sink`]).

use std::cell::Cell;
use std::sync::OnceLock;

use streamsan::model::op::Access;
use streamsan::model::race::RaceEntry;
use streamsan::model::streams::StreamInfo;
use streamsan::model::{Model, Sink};
use streamsan_driver_api::{CUcontext, CUDA_SUCCESS, CU_STREAM_NON_BLOCKING};

use super::batch;
use crate::intercept::driver;

streamsan::hot! {
    /// Boxed, so that the `OnceLock`'s state, which every launch checks, is beside the
    /// other hot statics and not after a thousand bytes of model in a line of its own.
    static MODEL: OnceLock<Box<Model>> = OnceLock::new();
}
static SINK: OnceLock<&'static dyn Sink> = OnceLock::new();

/// The happens-before model of this process, told everything the process did so far: the
/// work waiting in [`batch`] is told first.
pub fn model() -> &'static Model {
    let model = unsettled();
    batch::settle(model);
    model
}

/// The model, with the work waiting in [`batch`] not yet told: for the calls that add to it
/// (launches, asynchronous memsets), which read only what queued work does not change
/// (kernels, buffers' places and kinds, learnt footprints).
pub fn unsettled() -> &'static Model {
    MODEL.get_or_init(|| Box::new(Model::new(Box::new(describe_stream), Some(Box::new(Installed)))))
}

thread_local! {
    static ACCESSES: Cell<Vec<Access>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's list for the accesses of a copy or a memset, emptied: the
/// list is kept from call to call, so that telling the model allocates nothing. (A call made
/// inside `f`, or in exit handlers once the thread's storage is gone, gets a fresh one.)
pub fn with_accesses<R>(f: impl FnOnce(&mut Vec<Access>) -> R) -> R {
    let mut list = ACCESSES.try_with(Cell::take).unwrap_or_default();
    list.clear();
    let result = f(&mut list);
    let _ = ACCESSES.try_with(|kept| kept.set(list));
    result
}

/// Tells the model the work waiting in [`batch`]: for the thread that serves the batch, for
/// whoever writes the whole report, and, with the host-race guard on, before a copy the host
/// waits for, so that the thread tells it while the device works instead of after. Returns
/// how many operations this call told.
pub fn settle() -> usize {
    MODEL.get().map_or(0, |model| batch::settle(model))
}

/// The model, if a call has made it (its batch as it stands: [`settle`] first).
pub fn made() -> Option<&'static Model> {
    MODEL.get().map(|model| &**model)
}

/// Where the model's races go from now on.
pub fn install_sink(sink: &'static dyn Sink) {
    let _ = SINK.set(sink);
}

/// The model's sink: whatever the process life installed.
struct Installed;

impl Sink for Installed {
    fn race(&self, entry: &RaceEntry) {
        if let Some(sink) = SINK.get() {
            sink.race(entry);
        }
    }
}

/// A stream the model did not see created: ask the driver its context and flags.
fn describe_stream(handle: u64) -> Option<StreamInfo> {
    let queries = driver::queries();
    let stream = handle as *mut core::ffi::c_void;
    let mut ctx: CUcontext = core::ptr::null_mut();
    let mut flags = 0u32;
    // SAFETY: valid out-pointers; the driver checks the handle.
    unsafe {
        if queries.stream_get_ctx?(stream, &mut ctx) != CUDA_SUCCESS {
            return None;
        }
        if let Some(get_flags) = queries.stream_get_flags {
            get_flags(stream, &mut flags);
        }
    }
    Some(StreamInfo { ctx: ctx as u64, non_blocking: flags & CU_STREAM_NON_BLOCKING != 0 })
}
