//! Other processes that share memory and events with this one through CUDA IPC: their
//! streams as slots of this process's clocks, what each of their accesses knew, and the
//! [`Exchange`] through which the model hears of them (`docs/semantics.md#ipc`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use super::clock::{Epoch, Slot, VectorClock};
use super::op::{Mode, OpRecord};
use super::Model;

/// Names one piece of shared memory alike in every process that shares it: the exporting
/// process and the address it exported there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShareKey {
    pub pid: u32,
    pub addr: u64,
}

/// A buffer's part in shared memory: its key, where offset 0 lies in this process, how many
/// bytes are shared, and how far this process has read what others published on it.
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    pub key: ShareKey,
    pub start: u64,
    pub size: u64,
    pub seen: usize,
}

/// A stream of another process, as that process describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerStream {
    pub pid: u32,
    /// Its slot there.
    pub slot: Slot,
    /// How that process names it, e.g. `stream 0x55d0c0 (non-blocking)`.
    pub label: String,
    pub handle: u64,
    pub kind: String,
    pub ctx: u64,
}

/// The moment, in nanoseconds of `CLOCK_MONOTONIC`: one clock for every process of the
/// machine, so that one process's moments compare with another's.
pub fn now() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC is always there.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// An epoch of any process of the run: (process, slot there, time).
pub type PeerEpoch = (u32, Slot, u32);

/// One access to shared memory, by bytes from its start.
#[derive(Clone, Debug)]
pub struct SharedAccess {
    pub lo: u64,
    pub hi: u64,
    pub mode: Mode,
    pub op: OpRecord,
    /// What the operation's clock knew of other processes' streams, as epochs of the run.
    pub knew: Vec<PeerEpoch>,
    /// When the operation was issued ([`now`]; 0: before the memory was shared).
    pub issued_at: u64,
}

/// What this process keeps of another process's access: what it knew, and when it was issued.
struct PeerOp {
    knew: VectorClock,
    issued_at: u64,
}

/// How the model talks to the other processes of the run. The shim implements it over a
/// directory of files; the model calls it only at accesses to shared memory (the shim tells
/// it of IPC events itself: [`Model::event_recorded_by_peer`]).
pub trait Exchange: Send + Sync {
    /// Publishes this process's `access` to the shared memory `key`, and returns the
    /// accesses other processes published to it after the first `seen` (advanced), in this
    /// process's terms ([`Model::peer_slot`]). What the other processes' hosts waited for
    /// is told to the model meanwhile ([`Model::completed_by_peer`]).
    fn access(&self, model: &Model, key: ShareKey, seen: &mut usize, access: &SharedAccess) -> Vec<SharedAccess>;
}

/// The model's side of the other processes: which slots stand for their streams, and what
/// their accesses knew.
#[derive(Default)]
pub struct Peers {
    /// Whether any slot stands for another process's stream: the checks below cost nothing
    /// until one does.
    any: AtomicBool,
    /// The local slot of each (process, slot there).
    slots: Mutex<HashMap<(u32, Slot), Slot>>,
    /// The reverse: the process and slot a local slot stands for.
    origins: RwLock<HashMap<Slot, (u32, Slot)>>,
    /// Each access of another process, by its epoch here.
    ops: Mutex<HashMap<Epoch, PeerOp>>,
    /// What the other processes' hosts have waited for, by slot here: each wait's time in
    /// the slot and the moment ([`now`]) it was over.
    completed: Mutex<HashMap<Slot, Vec<(u32, u64)>>>,
    exchange: std::sync::OnceLock<Box<dyn Exchange>>,
}

impl Peers {
    /// The process and slot the local `slot` stands for, if another process's.
    pub fn origin(&self, slot: Slot) -> Option<(u32, Slot)> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.origins.read().unwrap_or_else(|e| e.into_inner()).get(&slot).copied()
    }

    pub fn is_peer(&self, slot: Slot) -> bool {
        self.origin(slot).is_some()
    }

    /// Whether the access `earlier` of another process is no race with this process's
    /// operation `later`, issued at `issued_at` ([`now`]): it knew of it (it was issued after
    /// it), or its process's host had waited for it before `later` was issued (it was over;
    /// the host then told this one, through a pipe, a socket or a counter in shared memory
    /// streamsan does not see, that the memory was free).
    pub fn no_race(&self, earlier: Epoch, later: Epoch, issued_at: impl FnOnce() -> u64) -> bool {
        if !self.is_peer(earlier.slot) {
            return false;
        }
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        if ops.get(&earlier).is_some_and(|op| later.happens_before(&op.knew)) {
            return true;
        }
        drop(ops);
        let completed = self.completed.lock().unwrap_or_else(|e| e.into_inner());
        let Some(times) = completed.get(&earlier.slot) else { return false };
        // The first wait that covered it: times and moments grow together.
        let first = times.partition_point(|&(time, _)| time < earlier.time);
        times.get(first).is_some_and(|&(_, at)| at < issued_at())
    }

    /// Whether the access of another process `earlier` was issued after `moment` ([`now`]):
    /// a race it makes with an operation of this process issued then is told in that order.
    pub fn issued_after(&self, earlier: Epoch, moment: u64) -> bool {
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        ops.get(&earlier).is_some_and(|op| op.issued_at > moment)
    }

    pub(super) fn remember(&self, epoch: Epoch, knew: VectorClock, issued_at: u64) {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).insert(epoch, PeerOp { knew, issued_at });
    }

    /// Another process's host had waited, at `at`, for its work up to `clock`.
    pub(super) fn complete(&self, clock: &VectorClock, at: u64) {
        let mut completed = self.completed.lock().unwrap_or_else(|e| e.into_inner());
        for (slot, time) in clock.entries() {
            let times = completed.entry(slot).or_default();
            if times.last().is_none_or(|&(last, _)| time > last) {
                times.push((time, at));
            }
        }
    }

    pub(super) fn exchange(&self) -> Option<&dyn Exchange> {
        self.exchange.get().map(|e| &**e)
    }

    pub(super) fn slot(&self, pid: u32, slot: Slot, make: impl FnOnce() -> Slot) -> (Slot, bool) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&local) = slots.get(&(pid, slot)) {
            return (local, false);
        }
        let local = make();
        slots.insert((pid, slot), local);
        self.origins.write().unwrap_or_else(|e| e.into_inner()).insert(local, (pid, slot));
        self.any.store(true, Ordering::Release);
        (local, true)
    }

    pub(super) fn install(&self, exchange: Box<dyn Exchange>) {
        let _ = self.exchange.set(exchange);
    }
}
