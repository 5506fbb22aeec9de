//! The footprint engine ([`streamsan_footprint`]) in the shim, with `footprint=exact|learn`:
//! started at load, told of each launch, and read only once the program's own
//! synchronization told the model that the launches completed ([`collect`]), so that it never
//! waits on a program's stream. Where it cannot run, the shim works as with
//! `footprint=params`, and the report says why.

use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use std::sync::OnceLock;

use streamsan::model::footprint::learnt::{Lookup, POINTER};
use streamsan::model::footprint::measured::{measured_mode, measured_place, Footprint as MeasuredFootprint};
use streamsan::model::op::{Access, WaitPlace};
use streamsan::model::race::{FootprintUnavailable, FootprintUnmeasured, NoteKind};
use streamsan::model::Model;
use streamsan::options::Footprint;
use streamsan_footprint as engine;

use streamsan::phases::{self, Phase};

use super::kernels::{self, KernelInfo};
use super::model::{model, unsettled};
use crate::host_races;
use crate::intercept::options::options;
use crate::intercept::{diag, driver};

streamsan::hot! {
    /// Whether launches are measured (the options ask for it and the engine started).
    static ACTIVE: AtomicBool = AtomicBool::new(false);
}
/// The mode in force once the engine started.
static MODE: OnceLock<Footprint> = OnceLock::new();

/// Starts the engine if the options ask for it; once, from the shim's constructor, before
/// the program's first driver call (the API must subscribe before the driver starts).
pub fn start() {
    if options().footprint == Footprint::Params {
        return;
    }
    let why = match real_driver() {
        None => engine::Unavailable::NoLibrary("the CUDA driver lacks functions the engine needs".into()),
        Some(driver) => match engine::start(driver) {
            Ok(()) => {
                let _ = MODE.set(options().footprint);
                streamsan::model::footprint::learnt::TRACE.store(trace(), Ordering::Relaxed);
                ACTIVE.store(true, Ordering::Release);
                return;
            }
            Err(why) => why,
        },
    };
    let subject = match why {
        engine::Unavailable::NoLibrary(_) => FootprintUnavailable::NoLibrary,
        engine::Unavailable::OtherSubscriber => FootprintUnavailable::OtherSubscriber,
        engine::Unavailable::Refused(_) => FootprintUnavailable::Refused,
    };
    model().footprint_note(NoteKind::FootprintUnavailable, subject as u64, None);
    // Without the library the default mode says so in the report alone: a machine without
    // a CUDA toolkit would warn at every run.
    if options().footprint == Footprint::Learn && subject == FootprintUnavailable::NoLibrary {
        return;
    }
    diag::warn(&format!(
        "footprint={} is not available: {why}; kernels' footprints are their parameters' pointers",
        options().footprint
    ));
}

fn real_driver() -> Option<engine::Driver> {
    fn find<F: Copy>(name: &core::ffi::CStr) -> Option<F> {
        let f = driver::lookup(name);
        // SAFETY: F is the driver's signature for `name` (cuda.h).
        (!f.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, F>(&f) })
    }
    Some(engine::Driver {
        dlsym: driver::real_dlsym()?,
        ctx_get_current: find(c"cuCtxGetCurrent")?,
        stream_is_capturing: find(c"cuStreamIsCapturing")?,
        twins: engine::TwinDriver {
            func_get_module: find(c"cuFuncGetModule")?,
            kernel_get_function: find(c"cuKernelGetFunction"),
            func_get_name: find(c"cuFuncGetName")?,
            module_load_data: find(c"cuModuleLoadData")?,
            module_get_function: find(c"cuModuleGetFunction")?,
            module_unload: find(c"cuModuleUnload")?,
            func_get_attribute: find(c"cuFuncGetAttribute")?,
            func_set_attribute: find(c"cuFuncSetAttribute")?,
            module_get_global: find(c"cuModuleGetGlobal_v2")?,
            memcpy_dtod_async: find(c"cuMemcpyDtoDAsync_v2")?,
            mem_alloc: find(c"cuMemAlloc_v2")?,
            mem_free: find(c"cuMemFree_v2")?,
            memset_d8_async: find(c"cuMemsetD8Async")?,
            stream_create: find(c"cuStreamCreate")?,
            stream_synchronize: find(c"cuStreamSynchronize")?,
            stream_destroy: find(c"cuStreamDestroy_v2")?,
            launch_kernel: find(c"cuLaunchKernel")?,
        },
    })
}

/// `STREAMSAN_FOOTPRINT_TRACE=1`: printed on stderr, each launch planned for measuring
/// in `footprint=learn` (its kernel and its words: why it was not learnt), each
/// footprint read and what was learnt of it, and the engine's counters at exit.
/// `=counters`: the counters only (for debugging the engine on a new driver or GPU).
/// Anything else, or unset: nothing is printed, and the trace costs a launch the load of
/// a flag.
fn trace() -> bool {
    trace_level() == 2
}

fn trace_level() -> u8 {
    static TRACE: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| match std::env::var("STREAMSAN_FOOTPRINT_TRACE").as_deref() {
        Ok("1") => 2,
        Ok("counters") => 1,
        _ => 0,
    })
}

/// Whether launches are measured.
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// In `footprint=learn`, before a launch's real call, its parameters' `accesses` read: a
/// launch whose footprint was learnt gets the learnt accesses instead and is not measured,
/// unless it is one that checks what was learnt ([`Lookup::Sample`]); the others are to be
/// measured, and the kernel to learn under is returned, its words left in `words` and its
/// anchors in `anchors` ([`streamsan::model::footprint::learnt`]). The launch then goes
/// through [`launch`].
///
/// # Safety
/// `params` and `extra` are the launch's own arguments, valid as the driver requires.
#[allow(clippy::too_many_arguments)]
pub unsafe fn plan(
    model: &Model,
    info: &KernelInfo,
    f: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    shape: [u32; 6],
    accesses: &mut Vec<Access>,
    words: &mut Vec<u64>,
    anchors: &mut Vec<Access>,
) -> Option<u64> {
    let _timer = phases::start(Phase::FootprintPlan);
    // SAFETY: the caller's promise.
    unsafe { launch_words(info, params, extra, shape, accesses, words) };
    anchor_words(model.buffer_range(), words, anchors);
    let kernel = kernel_key(info, f);
    let why = match model.apply_learnt(kernel, words, accesses, anchors) {
        Lookup::Applied => return None,
        Lookup::Unknown { kernel_seen: false } => "new kernel",
        Lookup::Unknown { kernel_seen: true } => "new key",
        Lookup::Sample => "sample",
        Lookup::Unlearnable => "unlearnable",
    };
    if trace() {
        let name = info.id.map(|id| model.kernel_name(id)).unwrap_or_default();
        eprintln!("streamsan: footprint plan: measure ({why}) {name} words {words:x?}");
    }
    Some(kernel)
}

/// Whether a launch's parameters are read before its real call: in `footprint=learn`, to
/// know whether its footprint was learnt ([`plan`]).
#[inline]
pub fn reads_parameters_first() -> bool {
    active() && MODE.get() == Some(&Footprint::Learn)
}

/// Whether every launch is measured (`footprint=exact`).
#[inline]
pub fn measures_every_launch() -> bool {
    active() && MODE.get() == Some(&Footprint::Exact)
}

/// Makes a launch of `f` on `stream` (the handle the driver knows it by on this thread:
/// never 0, which means two streams), of grid and block `shape`, through `call` (the real
/// driver function with the program's other arguments): to `measure` it, on its twin
/// ([`engine::arm`]), and if the driver refuses the twin's launch, as the program made it.
/// The driver's status, and the launch's ticket if it was measured; a launch to measure that
/// was not gets a note saying why.
pub fn launch(
    f: *mut c_void,
    stream: *mut c_void,
    shape: [u32; 6],
    measure: bool,
    call: impl Fn(*mut c_void) -> u32,
) -> (u32, Option<u64>) {
    // While a stream captures in global or thread-local mode, even asking whether a launch's
    // stream captures may break the program's capture: nothing is measured then.
    if !measure || !active() || super::load_gate::capturing() {
        return (call(f), None);
    }
    let may_load = super::load_gate::open();
    let threads = shape.iter().map(|&d| u64::from(d)).product();
    let sent = phases::time(Phase::FootprintArm, || engine::arm(f, stream, threads, may_load));
    let status = call(sent);
    match phases::time(Phase::FootprintArm, || engine::outcome(status == 0)) {
        engine::Outcome::Measured(ticket) => (status, Some(ticket.0)),
        engine::Outcome::Skipped => (status, None),
        engine::Outcome::Unmeasured(why) => {
            note_unmeasured(why);
            if why == engine::Unmeasured::Refused {
                return (call(f), None);
            }
            (status, None)
        }
    }
}

/// Notes why a launch to measure was not, where the report should say it (not for a launch
/// put off to a later one).
pub fn note_unmeasured(why: engine::Unmeasured) {
    let note = match why {
        engine::Unmeasured::NoTable => FootprintUnmeasured::NoTable,
        engine::Unmeasured::NoTwin(engine::NoTwin::ModuleState) => FootprintUnmeasured::ModuleState,
        engine::Unmeasured::NoTwin(engine::NoTwin::NoCode) => FootprintUnmeasured::NoTwin,
        engine::Unmeasured::NoTwin(engine::NoTwin::Busy) | engine::Unmeasured::NotNow => return,
        engine::Unmeasured::Refused => FootprintUnmeasured::Refused,
    };
    model().footprint_note(NoteKind::FootprintUnmeasured, note as u64, None);
}

/// A kernel's identity for learnt footprints: its name's id, else its handle.
fn kernel_key(info: &KernelInfo, f: *mut c_void) -> u64 {
    info.id.map_or(f as u64, |k| u64::from(k.0) | 1 << 63)
}

/// Words of the launch shape at the head of a launch's words.
const SHAPE_WORDS: usize = 3;

/// A launch's words for learnt footprints: its shape, then its parameter block in 8-byte
/// words (bytes between parameters zero), each pointer into a buffer (`accesses`' slots)
/// as [`POINTER`]: the footprint is relative to those.
unsafe fn launch_words(
    info: &KernelInfo,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    shape: [u32; 6],
    accesses: &[Access],
    words: &mut Vec<u64>,
) {
    words.clear();
    words.extend(shape.chunks_exact(2).map(|d| u64::from(d[0]) | u64::from(d[1]) << 32));
    let mut put = |base: *const u8, at: usize, len: usize| {
        let end = SHAPE_WORDS + (at + len).div_ceil(8);
        if words.len() < end {
            words.resize(end, 0);
        }
        let mut k = 0;
        while k < len {
            let offset = at + k;
            let word = &mut words[SHAPE_WORDS + offset / 8];
            if offset.is_multiple_of(8) && k + 8 <= len {
                // SAFETY: inside the parameter's bytes.
                *word = unsafe { (base.add(k) as *const u64).read_unaligned() };
                k += 8;
            } else {
                // SAFETY: likewise.
                *word |= u64::from(unsafe { *base.add(k) }) << (8 * (offset % 8));
                k += 1;
            }
        }
    };
    if !params.is_null() && !info.params.is_empty() {
        for (i, p) in info.params.iter().enumerate() {
            // SAFETY: one pointer per parameter, each to the parameter's value.
            let value = unsafe { *params.add(i) } as *const u8;
            if !value.is_null() {
                put(value, p.offset, p.size);
            }
        }
    } else if !extra.is_null() {
        // SAFETY: the caller's promise.
        if let Some((buffer, size)) = unsafe { kernels::extra_buffer(extra) } {
            put(buffer, 0, size);
        }
    }
    for slot in accesses.iter().filter_map(|a| a.slot) {
        if let Some(word) = words.get_mut(SHAPE_WORDS + slot as usize / 8).filter(|_| slot % 8 == 0) {
            *word = POINTER;
        }
    }
    split_shared_words(info, words);
}

/// The words of a launch's parameters that point where buffers lie though the parameter
/// scan left them out (a field of a by-value structure once seen holding data, such as a
/// tensor list's entry that held a stale host address): as [`POINTER`] in `words`, and each
/// in `anchors`. No access of the launch, but what its measured ranges are attributed to
/// and its learnt extents given through, so that its key does not hold addresses that move
/// from step to step.
fn anchor_words(range: core::ops::Range<u64>, words: &mut [u64], anchors: &mut Vec<Access>) {
    anchors.clear();
    for (i, word) in words.iter_mut().enumerate().skip(SHAPE_WORDS) {
        if *word != POINTER && range.contains(word) {
            let slot = ((i - SHAPE_WORDS) * 8) as u32;
            anchors.push(Access::field(*word, slot));
            *word = POINTER;
        }
    }
}

/// Each parameter of fewer than 8 bytes that shares its 8-byte word with another parameter,
/// moved out of that word to one of its own at the end of `words`. Why: a byte the program
/// never writes (the one byte of an empty lambda beside a 4-byte size, in PyTorch's
/// elementwise kernels) would keep every key of its word new, and the size beside it keeps
/// the word in the key; on a word of its own it varies alone and leaves the key as any word
/// that varies without moving the footprint.
fn split_shared_words(info: &KernelInfo, words: &mut Vec<u64>) {
    let word_of = |offset: usize| SHAPE_WORDS + offset / 8;
    for (i, p) in info.params.iter().enumerate() {
        let within = p.offset % 8;
        if p.size == 0 || p.size >= 8 || within + p.size > 8 {
            continue;
        }
        let shared = info.params.iter().enumerate().any(|(j, q)| {
            j != i && q.size > 0 && q.offset / 8 <= p.offset / 8 && p.offset / 8 <= (q.offset + q.size - 1) / 8
        });
        let Some(&word) = words.get(word_of(p.offset)).filter(|_| shared) else { continue };
        let mask = ((1u64 << (8 * p.size)) - 1) << (8 * within);
        words[word_of(p.offset)] = word & !mask;
        words.push((word & mask) >> (8 * within));
    }
}

/// A measured launch that the model took as a graph node (its stream captures): its table
/// goes back unread.
pub fn discard(ticket: u64) {
    engine::discard(engine::Ticket(ticket));
}

/// Reads the footprints of the launches the program has now synchronized with, and gives
/// them to the model. Called by a synchronizing call's hook once it queued the host's join.
pub fn collect() {
    // Reading tables copies and synchronizes on the engine's stream: calls a capture in
    // global or thread-local mode forbids (the tables wait for the next synchronization).
    if !active() || super::load_gate::capturing() {
        return;
    }
    let _timer = phases::start(Phase::FootprintCollect);
    // In `learn`'s steady state nothing waits to be read: then the model is not told the
    // queued batch here on the program's thread, as `model()` would at every synchronize.
    if !unsettled().launches_pending() {
        return;
    }
    let model = model();
    let tickets = model.completed_launches();
    if tickets.is_empty() {
        return;
    }
    // The host's faults in bytes guarded before these footprints were known, told first:
    // the footprints decide which are races.
    if host_races::enabled() {
        host_races::drain();
    }
    let tickets: Vec<engine::Ticket> = tickets.into_iter().map(engine::Ticket).collect();
    let mut accesses = Vec::new();
    engine::collect(&tickets, |ticket, measured| match measured {
        Some(measured) => {
            if trace() {
                eprintln!(
                    "streamsan: footprint of launch {}: {:x?} covers {:x?} wait known {}",
                    ticket.0, measured.ranges, measured.covers, measured.wait_known
                );
            }
            let access = |r: &engine::Range| Access {
                residues: r.residues,
                place: measured_place(r.flags, measured.wait_known),
                ..Access::new(r.lo, r.hi - r.lo, measured_mode(r.flags))
            };
            accesses.clear();
            accesses.extend(measured.ranges.iter().map(access));
            if !measured.covers.is_empty() {
                model.footprint_note(NoteKind::FootprintOverflow, ticket.0, Some(ticket.0));
            }
            // A cover may hold accesses of both sides of a wait: its place is not known.
            let covers: Vec<Access> =
                measured.covers.iter().map(|r| Access { place: WaitPlace::Unknown, ..access(r) }).collect();
            let footprint = MeasuredFootprint { ranges: &accesses, covers: &covers };
            model.launch_measured(ticket.0, Some(footprint));
        }
        None => model.launch_measured(ticket.0, None),
    });
}

/// Whether the program's function `f` waits on its grid dependencies somewhere in its code:
/// None where the engine does not run or could not read the code.
pub fn waits_for_grid(f: *mut c_void) -> Option<bool> {
    if !active() {
        return None;
    }
    engine::waits_for_grid(f)
}

/// At exit: reads what completed, and lets the launches still pending stand on their
/// parameters (their kernels may still run: their tables are not read).
pub fn finish() {
    if !active() {
        return;
    }
    collect();
    let model = model();
    if trace_level() > 0 {
        let c = engine::counters();
        eprintln!(
            "streamsan: footprints: {} launches measured ({} in wide tables), {} without a free table, {} overflowed, {} twin launches refused; {} twins loaded ({} with their module's variables mirrored), {} modules with state that has no name, {} without code to load; {} µs making twins, {} µs reading tables; {} µs arming launches, {} µs of it and after them copying {} variables by {} launches of the copier and {} copies by the driver; of the tables that overflowed, {} wide and {} common ones of launches that wanted a wide one; {} µs binding tables, {} µs copying variables back",
            c.measured, c.wide, c.no_table, c.overflowed, c.refused, c.twins, c.mirrored, c.with_state, c.without_code, c.twins_us, c.reading_us,
            c.arming_us, c.mirroring_us, c.variable_copies, c.copier_launches, c.driver_copies, c.overflowed_wide,
            c.overflowed_wanting_wide, c.binding_us, c.mirroring_back_us
        );
        if MODE.get() == Some(&Footprint::Learn) {
            let l = model.learnt_summary();
            eprintln!(
                "streamsan: learnt: {} launches on learnt footprints; {} kernels, {} keys ({} with a cover, {} unlearnable), {} words left out of keys",
                l.applied, l.kernels, l.keys, l.covers, l.unlearnable, l.ignored_words
            );
        }
    }
    for ticket in model.pending_launches() {
        model.launch_measured(ticket, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_pointing_where_buffers_lie_that_no_access_holds_becomes_an_anchor() {
        let range = 0x7f00_0000_0000..0x7f10_0000_0000;
        // The shape, a pointer the scan took, a stale field pointing into a buffer, a size.
        let mut words = vec![1, 1, 1, POINTER, 0x7f00_0000_4000, 64];
        let mut anchors = Vec::new();
        anchor_words(range, &mut words, &mut anchors);
        assert_eq!(words, [1, 1, 1, POINTER, POINTER, 64]);
        let anchored: Vec<_> = anchors.iter().map(|a| (a.addr, a.slot)).collect();
        assert_eq!(anchored, [(0x7f00_0000_4000, Some(8))]);
    }
}
