//! The footprint engine ([`streamsan_footprint`]) in the shim: started by the process life
//! at load when the options ask for `exact` or `learn` (and finished at exit), told of each
//! launch, and read when the program synchronizes.
//!
//! A measured launch is issued to the model at once ([`streamsan::model::Model::launch_deferred`])
//! and checked when its footprint is read. Footprints are read only after the program's own
//! synchronization told the model that their launches completed ([`collect`], called by the
//! hooks of synchronizing calls): the engine never waits on a program's stream.
//!
//! Where the engine cannot run (no Compute Sanitizer library, another tool holding the API,
//! a driver that refuses), the shim works as with `footprint=params`, with a note in the
//! report saying why.

use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use std::hash::Hasher;
use std::sync::OnceLock;

use streamsan::hash::FastHasher;
use streamsan::model::learnt::Lookup;
use streamsan::model::op::Access;
use streamsan::model::race::{FootprintUnavailable, NoteKind};
use streamsan::model::Model;
use streamsan::options::Footprint;
use streamsan_footprint as engine;

use streamsan::phases::{self, Phase};

use super::kernels::{self, KernelInfo};
use super::model::model;
use crate::intercept::options::options;
use crate::intercept::{diag, driver};

/// In `footprint=learn`, launches of a module's kernels in a row that used learnt footprints
/// before the module is unpatched.
const QUIET_LAUNCHES: u64 = 4;

/// Whether launches are measured (the options ask for it and the engine started).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The mode in force once the engine started.
static MODE: OnceLock<Footprint> = OnceLock::new();

/// Starts the engine if the options ask for it; once, from the shim's constructor, before
/// the program's first driver call (the API must subscribe before the driver starts).
pub fn start() {
    if options().footprint == Footprint::Params {
        return;
    }
    let why = match real_driver() {
        None => engine::Unavailable::NoLibrary("the CUDA driver lacks context or stream functions".into()),
        Some(driver) => match engine::start(driver) {
            Ok(()) => {
                let _ = MODE.set(options().footprint);
                if options().footprint == Footprint::Learn {
                    // Learnt kernels run their code as compiled: a module whose launches all
                    // used what was learnt for a while is unpatched, until one must be measured.
                    engine::unpatch_quiet_modules(QUIET_LAUNCHES);
                }
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
        stream_create: find(c"cuStreamCreate")?,
    })
}

/// `STREAMSAN_FOOTPRINT_TRACE=1`: each footprint read is printed on stderr, and the engine's
/// counters at exit; `=counters`: the counters only (for debugging the engine on a new
/// driver or GPU).
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
/// launch whose footprint was learnt gets the learnt accesses instead and is not measured;
/// the others are measured, and the key and kernel to learn under are returned.
///
/// # Safety
/// `params` and `extra` are the launch's own arguments, valid as the driver requires.
pub unsafe fn plan(
    model: &Model,
    info: &KernelInfo,
    f: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    shape: [u32; 6],
    accesses: &mut [Access],
) -> Option<(u64, u64)> {
    let _timer = phases::start(Phase::FootprintPlan);
    // SAFETY: the caller's promise.
    let key = unsafe { learn_key(info, f, params, extra, shape, accesses) };
    let kernel = kernel_key(info, f);
    let measure = model.apply_learnt(key, kernel, accesses) != Lookup::Applied;
    engine::maintain();
    let measure = measure && engine::prepare();
    engine::arm(measure);
    measure.then_some((key, kernel))
}

/// Whether a launch's parameters are read before its real call: in `footprint=learn`, to
/// know whether its footprint was learnt ([`plan`]).
#[inline]
pub fn reads_parameters_first() -> bool {
    active() && MODE.get() == Some(&Footprint::Learn)
}

/// Before the real call of a launch whose parameters are read after it: arms the engine in
/// `footprint=exact`.
#[inline]
pub fn arm_for_launch() {
    if active() {
        let _timer = phases::start(Phase::FootprintPlan);
        let measure = MODE.get() == Some(&Footprint::Exact) && engine::prepare();
        engine::arm(measure);
    }
}

/// A kernel's identity for learnt footprints: its name's id, else its handle.
fn kernel_key(info: &KernelInfo, f: *mut c_void) -> u64 {
    info.id.map_or(f as u64, |k| u64::from(k.0) | 1 << 63)
}

/// The key of a launch's learnt footprint: its kernel, its shape, and every parameter byte
/// but the pointers into buffers (`accesses`' slots), which the footprint is relative to.
unsafe fn learn_key(
    info: &KernelInfo,
    f: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    shape: [u32; 6],
    accesses: &[Access],
) -> u64 {
    let mut h = FastHasher::default();
    h.write_u64(kernel_key(info, f));
    for d in shape {
        h.write_u32(d);
    }
    let pointer = |offset: usize| accesses.iter().any(|a| a.slot == Some(offset as u32));
    let mut bytes = |base: *const u8, at: usize, len: usize| {
        let mut k = 0;
        while k < len {
            let offset = at + k;
            if offset.is_multiple_of(8) && k + 8 <= len {
                if !pointer(offset) {
                    // SAFETY: inside the parameter's bytes.
                    h.write_u64(unsafe { (base.add(k) as *const u64).read_unaligned() });
                }
                k += 8;
                continue;
            }
            // SAFETY: inside the parameter's bytes.
            h.write_u8(unsafe { *base.add(k) });
            k += 1;
        }
    };
    if !params.is_null() && !info.params.is_empty() {
        for (i, p) in info.params.iter().enumerate() {
            // SAFETY: one pointer per parameter, each to the parameter's value.
            let value = unsafe { *params.add(i) } as *const u8;
            if !value.is_null() {
                bytes(value, p.offset, p.size);
            }
        }
    } else if !extra.is_null() {
        // SAFETY: the caller's promise.
        if let Some((buffer, size)) = unsafe { kernels::extra_buffer(extra) } {
            bytes(buffer, 0, size);
        }
    }
    h.finish()
}

/// Just after a launch's real call: its ticket, if it was measured.
#[inline]
pub fn ticket() -> Option<u64> {
    if !active() {
        return None;
    }
    phases::time(Phase::FootprintPlan, || engine::take_ticket().map(|t| t.0))
}

/// A measured launch that the model took as a graph node (its stream captures): its table
/// goes back unread.
pub fn discard(ticket: u64) {
    engine::discard(engine::Ticket(ticket));
}

/// Reads the footprints of the launches the program has now synchronized with, and gives
/// them to the model. Called after a synchronizing call's hook told the model.
pub fn collect() {
    if !active() {
        return;
    }
    let _timer = phases::start(Phase::FootprintCollect);
    let model = model();
    let tickets = model.completed_launches();
    if tickets.is_empty() {
        return;
    }
    let tickets: Vec<engine::Ticket> = tickets.into_iter().map(engine::Ticket).collect();
    let mut accesses = Vec::new();
    engine::collect(&tickets, |ticket, measured| match measured {
        Some(measured) => {
            if trace() {
                eprintln!(
                    "streamsan: footprint of launch {}: {:x?} overflow {:x?}",
                    ticket.0, measured.ranges, measured.overflow
                );
            }
            accesses.clear();
            accesses.extend(measured.ranges.iter().chain(measured.overflow.iter()).map(|r| Access {
                addr: r.lo,
                len: r.hi - r.lo,
                mode: streamsan::model::deferred::measured_mode(r.flags),
                exact: true,
                slot: None,
            }));
            if measured.overflow.is_some() {
                model.footprint_note(NoteKind::FootprintOverflow, ticket.0, Some(ticket.0));
            }
            model.launch_measured(ticket.0, Some(&accesses));
        }
        None => model.launch_measured(ticket.0, None),
    });
}

/// At exit: reads what completed, and lets the launches still pending stand on their
/// parameters (their kernels may still run: their tables are not read).
pub fn finish() {
    if !active() {
        return;
    }
    collect();
    if trace_level() > 0 {
        let [measured, unmeasured, overflowed, unpatched, repatched] = engine::counters();
        eprintln!("streamsan: footprints: {measured} launches measured, {unmeasured} without a free table, {overflowed} overflowed; modules unpatched {unpatched} times, patched again {repatched} times");
    }
    let model = model();
    for ticket in model.pending_launches() {
        model.launch_measured(ticket, None);
    }
}
