//! Programmatic dependent launch: launches allowed to start before the kernel ahead of them on
//! their stream completes, asked per launch (`cuLaunchKernelEx`'s attribute) or per stream
//! (`cuStreamSetAttribute`), and whether a kernel, launched so or in a graph's kernel node,
//! waits on its grid dependencies (`docs/semantics.md#programmatic-dependent-launch`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use streamsan::model::op::GridWait;
use streamsan::model::streams::StreamRef;
use streamsan_driver_api::*;

use super::batch;
use super::call::handle_of;
use super::footprint;
use super::model::unsettled;

/// Streams whose every launch has programmatic stream serialization, by handle...
static STREAMS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// ...and whether there is any: a launch elsewhere costs one load.
static ANY: AtomicBool = AtomicBool::new(false);

/// `cuStreamSetAttribute` set the stream `handle`'s programmatic stream serialization to `on`.
pub fn stream_set(handle: u64, on: bool) {
    let mut streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    streams.retain(|&h| h != handle);
    if on {
        streams.push(handle);
    }
    ANY.store(!streams.is_empty(), Ordering::Release);
}

/// The stream `handle` was destroyed: a stream made later at its handle starts without it.
pub fn stream_destroyed(handle: u64) {
    if ANY.load(Ordering::Acquire) {
        stream_set(handle, false);
    }
}

/// Before the launch of `f` on `on` is told to the model: `asked` says whether the launch
/// itself asked for programmatic stream serialization. Tells the model (in the launch's
/// order) that a programmatic launch comes next, and whether its kernel waits: on a stream it
/// may overlap the kernel before it; captured, its node has programmatic edges.
pub fn before_told(f: CUfunction, on: StreamRef, asked: bool) {
    if asked || (ANY.load(Ordering::Acquire) && by_stream(handle_of(on))) {
        batch::programmatic_next(unsettled(), on, grid_wait(f));
    }
}

/// Whether the code of `f` waits on its grid dependencies, as far as it was read.
pub fn grid_wait(f: CUfunction) -> GridWait {
    match footprint::waits_for_grid(f.cast()) {
        Some(false) => GridWait::Never,
        Some(true) | None => GridWait::Unseen,
    }
}

fn by_stream(handle: u64) -> bool {
    STREAMS.lock().unwrap_or_else(|e| e.into_inner()).contains(&handle)
}
