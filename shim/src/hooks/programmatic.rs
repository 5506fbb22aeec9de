//! Programmatic dependent launch: launches allowed to start before the kernel ahead of them on
//! their stream completes, asked per launch (`cuLaunchKernelEx`'s attribute) or per stream
//! (`cuStreamSetAttribute`), and whether such a launch's kernel waits on its grid dependencies
//! (`docs/semantics.md#programmatic-dependent-launch`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use streamsan::model::streams::StreamRef;
use streamsan_driver_api::*;

use super::batch;
use super::call::{handle_of, origin};
use super::footprint;
use super::kernels;
use super::model::{model, unsettled};
use crate::intercept::driver;
use crate::intercept::variants::Call;

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

/// What a launch is, for programmatic dependent launch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// Ordered after the kernel before it, as any launch.
    Ordered,
    /// Programmatic, its kernel's code never waits on its grid dependencies: it overlaps the
    /// kernel before it (told to the model before the launch).
    Overlaps,
    /// Programmatic, its kernel waits somewhere or its code is not known: taken as ordered
    /// from its start, and noted after it is told ([`noted`]).
    Unseen,
}

/// Before the launch of `f` on `on` is told to the model: `asked` says whether the launch
/// itself asked for programmatic stream serialization. Tells the model an overlap first.
pub fn before_told(f: CUfunction, on: StreamRef, asked: bool) -> Launch {
    let programmatic = asked || (ANY.load(Ordering::Acquire) && by_stream(handle_of(on)));
    if !programmatic || driver::may_be_capturing(handle_of(on)) {
        return Launch::Ordered;
    }
    if footprint::waits_for_grid(f.cast()) == Some(false) {
        batch::overlap_next(unsettled(), on);
        return Launch::Overlaps;
    }
    Launch::Unseen
}

/// After the launch was told: notes one whose kernel's wait is not seen.
pub fn noted(call: &Call, f: CUfunction, on: StreamRef, launch: Launch) {
    if launch == Launch::Unseen {
        let kernel = kernels::info(unsettled(), f.cast()).id;
        model().programmatic_launch(on, kernel, &origin(call));
    }
}

fn by_stream(handle: u64) -> bool {
    STREAMS.lock().unwrap_or_else(|e| e.into_inner()).contains(&handle)
}
