//! Host races: the host touching memory it reaches (pinned, registered, managed) that an
//! asynchronous copy, memset or kernel it has not synchronized with still uses, seen
//! through page protection. Such an operation's bytes are guarded while it is in flight
//! ([`table`]), a fault there is the host's access ([`fault`]), and after every driver call
//! that moved the host's clock the joined operations are lifted ([`after_call`]).

mod actions;
mod calls;
mod fault;
mod lent;
#[cfg(target_arch = "x86_64")]
mod step;
mod table;

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use streamsan::model::clock::{Epoch, Slot};
use streamsan::model::host_races::{DeviceBytes, HostAccess};
use streamsan::model::op::{KernelId, Mode, OpRecord, Origin};
use streamsan::model::Model;

use crate::sites::{stack, thread};

/// Whether the guard is on (`host_races=1`, and its handler installed).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// The host clock's version at the last lift.
static SEEN: AtomicU64 = AtomicU64::new(u64::MAX);
/// The process's model, given by the layer above at install...
static MODEL: OnceLock<fn() -> &'static Model> = OnceLock::new();
/// ...and the same, told the work waiting in its batch first.
static SETTLED: OnceLock<fn() -> &'static Model> = OnceLock::new();

/// The process's model, as it stands: only reached once installed (every path here starts
/// from a guard set, which [`ENABLED`] allows only after install).
fn model() -> &'static Model {
    (MODEL.get().expect("host guard installed"))()
}

/// At load, with `host_races=1`: the SIGSEGV handler, ahead of every other; `model` gives
/// the process's model without telling it the work waiting in its batch (which every call
/// would then pay for, while an operation is in flight), which the guard asks and reports
/// to; `settled` gives it told first, for a race on an operation still waiting there
/// ([`drain`]); `head_pages`: how many pages of a range's start are guarded
/// ([`table::parts`]).
pub fn install(model: fn() -> &'static Model, settled: fn() -> &'static Model, head_pages: usize) {
    let _ = MODEL.set(model);
    let _ = SETTLED.set(settled);
    table::HEAD_PAGES.store(head_pages, Ordering::Relaxed);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        table::PAGE.store(page as usize, Ordering::Relaxed);
    }
    if actions::install(libc::SIGSEGV, fault::on_segv) {
        #[cfg(target_arch = "x86_64")]
        step::install();
        ENABLED.store(true, Ordering::Release);
        // SAFETY: plain extern "C" functions.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child)) };
    }
}

/// Whether the guard is on: an operation the host does not wait for that reaches memory the
/// host reaches must then be guarded, as it waits in the model's batch ([`work_queued`]) or
/// told at once ([`work_issued`]).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The time of a queued operation's epoch until the model is told it and gives it one: at
/// least this, above any time the model gives (a slot would need two billion operations),
/// so that the host has joined no pending operation. Its low bits tell pending ones apart.
const PENDING: u32 = 1 << 31;

/// Pending operations told, by the low bits of their pending time: (pending time, time told),
/// for a race on one found before the model was told it ([`resolve`]).
static TOLD: [AtomicU64; 4096] = [const { AtomicU64::new(0) }; 4096];

/// An asynchronous operation the host did not wait for (a copy, memset or launch), about to
/// wait in the model's batch on the stream of slot `slot`: guards the bytes it reaches that
/// the host reaches too now, as [`work_issued`] does, under a pending epoch of that slot,
/// which [`work_told`] replaces by the operation's own. None if nothing was guarded. The
/// operation then costs its thread the batch's telling no more than a launch does: told at
/// once, it would have the program's thread tell every launch queued before it.
///
/// What the guard asks of a pending operation's epoch: its slot, which a stream's or a
/// context's synchronize compares ([`lift_joined`]); whether the host joined it, which it
/// has not before the model is told it (a join told after it moves the host's clock after
/// the time is given); and a race's operation, which [`drain`] tells the model first to
/// find.
pub fn work_queued(
    origin: &Origin,
    kernel: Option<KernelId>,
    slot: Slot,
    reads: &[(u64, u64)],
    writes: &[(u64, u64)],
) -> Option<Epoch> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let pending = Epoch::new(slot, PENDING | (NEXT.fetch_add(1, Ordering::Relaxed) & !PENDING));
    work_issued(origin, kernel, pending, reads, writes, &[]).then_some(pending)
}

/// The model was told the operation guarded under `pending`: `told` is its epoch, or None if
/// it was captured into a graph, not run (then its guard is lifted).
pub fn work_told(pending: Epoch, told: Option<Epoch>) {
    if let Some(epoch) = told {
        TOLD[pending.time as usize % TOLD.len()]
            .store((pending.time as u64) << 32 | epoch.time as u64, Ordering::Release);
    }
    table::told(pending, told);
}

/// An operation of a race or a note with the epoch the model gave it: a pending one's is
/// looked up once the batch is told (the fault may come before it is).
fn resolve(mut bytes: DeviceBytes) -> DeviceBytes {
    let time = bytes.op.epoch.time;
    if time & PENDING == 0 {
        return bytes;
    }
    if let Some(settled) = SETTLED.get() {
        settled();
    }
    let found = TOLD[time as usize % TOLD.len()].load(Ordering::Acquire);
    if (found >> 32) as u32 == time {
        bytes.op.epoch.time = found as u32;
    }
    bytes
}

/// An asynchronous operation was issued as `epoch` (of `kernel`, for a launch) and the host
/// did not wait for it: guards the ranges of `reads` and `writes` in memory the host
/// reaches, pinned, registered or managed (of a long range, its first and last pages:
/// [`table::parts`]), and those of `unsure`, which a measured launch may reach, its faults
/// races only once its footprint says so (`Model::host_race`). Returns whether any are
/// guarded.
pub fn work_issued(
    origin: &Origin,
    kernel: Option<KernelId>,
    epoch: Epoch,
    reads: &[(u64, u64)],
    writes: &[(u64, u64)],
    unsure: &[(u64, u64)],
) -> bool {
    if !ENABLED.load(Ordering::Relaxed) {
        return false;
    }
    let model = model();
    let op = OpRecord::new(origin, kernel, epoch);
    let reached = |&&(addr, len): &&(u64, u64)| len > 0 && model.memory_kind(addr).is_some_and(|k| k.host_reachable());
    let bytes = |mode: Mode| move |&(lo, len): &(u64, u64)| DeviceBytes { op, mode, lo, hi: lo + len };
    let ranges: Vec<table::Guarded> = reads
        .iter()
        .filter(reached)
        .map(bytes(Mode::Read))
        .chain(writes.iter().filter(reached).map(bytes(Mode::Write)))
        .chain(unsure.iter().filter(reached).map(bytes(Mode::Unknown)))
        .flat_map(table::parts)
        .collect();
    if ranges.is_empty() {
        return false;
    }
    start_watcher();
    table::add(&ranges);
    // Another thread may have synchronized with the stream since the operation was issued:
    // the next look lifts it then.
    SEEN.store(u64::MAX, Ordering::Release);
    true
}

/// Whether an operation is guarded now: a join (a synchronize, a successful query) must then
/// lift what it surely joined ([`lift_joined`]) or be told before it returns
/// ([`after_call`]).
#[inline]
pub fn in_flight() -> bool {
    table::IN_FLIGHT.load(Ordering::Relaxed) != 0
}

/// After a join that surely covers the operations `joined` says, before it is told to the model:
/// lifts those. Returns whether any operation stays guarded.
pub fn lift_joined(joined: impl Fn(&DeviceBytes) -> bool) -> bool {
    table::lift(joined);
    in_flight()
}

/// Before every intercepted call: while operations are guarded, the driver's own accesses to
/// their pages during the call are the call's ([`lent`]). Returns whether the thread entered;
/// nothing in flight: one load.
#[inline]
pub fn before_call() -> bool {
    in_flight() && lent::enter()
}

/// After every driver call (`entered`: what [`before_call`] returned): gives back the pages
/// lent to the driver, then lifts the guards of the operations the host has joined, if the
/// host's clock moved. Nothing in flight: one load; in flight and no move: two more.
#[inline]
pub fn after_call(entered: bool) {
    if entered {
        lent::leave();
    }
    if !in_flight() {
        return;
    }
    let model = model();
    let version = model.host_version();
    if SEEN.load(Ordering::Acquire) != version && SEEN.swap(version, Ordering::AcqRel) != version {
        table::lift(|r| model.host_has_joined(r.op.epoch));
    }
}

/// Turns the faults recorded so far into races and notes: by the watcher as they come, and
/// at exit (which waits for the watcher to finish the ones it took).
pub fn drain() {
    static DRAINING: Mutex<()> = Mutex::new(());
    let _draining = DRAINING.lock().unwrap_or_else(|e| e.into_inner());
    fault::take_each(|f| {
        let thread = thread::of_tid(f.tid);
        let site = stack::intern_caught(&f.native[..f.native_len], &f.python[..f.python_len]);
        match f.verdict {
            fault::Verdict::Race { work, mode } => {
                let origin = Origin { api: "host", thread, site };
                model().host_race(resolve(work), HostAccess { origin, mode, lo: f.addr, hi: f.addr + f.len });
            }
            fault::Verdict::Outside { work } => model().host_guard_gave_up(resolve(work), table::page_of(f.addr)),
        }
    });
}

/// The watcher thread, started with the first guard (and again in a forked child).
fn start_watcher() {
    if fault::WAKE.load(Ordering::Acquire) >= 0 {
        return;
    }
    static STARTING: AtomicBool = AtomicBool::new(false);
    if STARTING.swap(true, Ordering::AcqRel) {
        return;
    }
    let mut fds = [0; 2];
    // SAFETY: a pipe for this process.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
        let read = fds[0];
        let spawned = std::thread::Builder::new().name("streamsan-host".into()).spawn(move || loop {
            let mut byte = [0u8; 64];
            // SAFETY: reading from our pipe.
            let n = unsafe { libc::read(read, byte.as_mut_ptr().cast(), byte.len()) };
            if n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted) {
                return;
            }
            drain();
        });
        if spawned.is_ok() {
            fault::WAKE.store(fds[1], Ordering::Release);
        }
    }
    STARTING.store(false, Ordering::Release);
}

extern "C" fn before_fork() {
    table::lock();
}

extern "C" fn after_fork_in_parent() {
    table::unlock();
}

/// The child cannot synchronize with its parent's operations: it gets every page back and
/// starts with nothing in flight (and, at its first guard, a watcher of its own).
extern "C" fn after_fork_in_child() {
    table::forked_child();
    table::clear_in_child();
    fault::forked_child();
    SEEN.store(u64::MAX, Ordering::Relaxed);
}
