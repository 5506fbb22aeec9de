//! Measured launches waiting for their footprint, and the log of what was issued while they
//! wait: when its footprint comes, a launch is checked against what was issued before it with
//! the clock it had at issue, and against what was issued after it through the log.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::learnt::Learning;
use crate::hash::FastSet;
use crate::model::buffers::Buffer;
use crate::model::clock::{Epoch, Slot, VectorClock};
use crate::model::op::{Access, Mode, OpRecord, Overlap, WaitPlace};
use crate::model::race::BufferFacts;

/// Accesses kept in the log at most; beyond, the oldest go (and races with them may be
/// missed, counted).
pub const MAX_LOGGED: usize = 1 << 16;

/// Ranges of one launch in one buffer at most: more are joined across their smallest gaps
/// (a cover, never a loss), keeping the buffer's history compact.
pub const MAX_RANGES_PER_BUFFER: usize = 8;

/// A measured launch waiting for its footprint.
pub(in crate::model) struct Pending {
    pub(in crate::model) ticket: u64,
    /// Its place in the issue order.
    pub(in crate::model) seq: u64,
    pub(in crate::model) op: OpRecord,
    pub(in crate::model) clock: VectorClock,
    /// How it is ordered after the kernel ahead of it (a programmatic launch): its accesses
    /// that may overlap that kernel are checked with another clock than `clock`.
    pub(in crate::model) overlap: Overlap,
    /// Buffers numbered from here were allocated after it was issued.
    pub(in crate::model) next_buffer: u64,
    /// The buffers its pointer parameters were in when it was issued: a pool may free one and
    /// hand its addresses out again before the footprint is read, and the launch's bytes
    /// were the first one's.
    pub(in crate::model) met: Vec<Arc<Buffer>>,
    /// When it was issued ([`crate::model::peers::now`]): what other processes sharing its
    /// memory had waited for by then is no race with it.
    pub(in crate::model) issued_at: u64,
    /// What its parameters say (what stands for memory reached without a patch point, such as
    /// Hopper's bulk tensor copies, which no measure sees).
    pub(in crate::model) guess: Vec<Access>,
    /// Its kernel and words, to learn its footprint from ([`super::learnt`]), in
    /// `footprint=learn`.
    pub(in crate::model) learn: Option<Learning>,
}

impl Pending {
    /// The buffer at `addr` when the launch was issued, among those its pointers were in.
    pub(in crate::model) fn met_at(&self, addr: u64) -> Option<&Arc<Buffer>> {
        met_at(&self.met, addr)
    }

    /// The clock its access `access` is checked with.
    pub(in crate::model) fn clock_of(&self, access: &Access) -> &VectorClock {
        self.overlap.clock(access, &self.clock)
    }
}

/// The buffer of `met` that holds `addr`, if one does.
pub(in crate::model) fn met_at(met: &[Arc<Buffer>], addr: u64) -> Option<&Arc<Buffer>> {
    met.iter().find(|b| b.base <= addr && addr < b.end())
}

/// An access (or a free) issued while some launch was pending.
#[derive(Clone, Debug)]
pub(in crate::model) struct Logged {
    pub(in crate::model) seq: u64,
    pub(in crate::model) lo: u64,
    pub(in crate::model) hi: u64,
    /// Of `[lo, hi)`, the bytes it touched ([`crate::model::residue`]).
    pub(in crate::model) residues: u64,
    pub(in crate::model) mode: Mode,
    /// A free: the buffer it freed, as it was (freed host memory is forgotten at once).
    pub(in crate::model) freed: Option<BufferFacts>,
    /// The id of the buffer the bytes were in (0: older than any launch pending then). A
    /// launch pending from before that buffer was allocated had its bytes in a predecessor
    /// at the same address, whose free is logged: the two are not checked.
    pub(in crate::model) buffer: u64,
    pub(in crate::model) op: OpRecord,
    /// For each stream (slot) with pending launches then: how far this access's clock knew it.
    pub(in crate::model) knew: Vec<(Slot, u32)>,
}

impl Logged {
    /// Whether the launch at `epoch` happens before this access.
    pub(in crate::model) fn after(&self, epoch: Epoch) -> bool {
        self.knew.iter().any(|&(slot, time)| slot == epoch.slot && epoch.time <= time)
    }
}

/// What was logged after a pending launch ([`PendingLaunches::take`]).
#[derive(Default)]
pub(in crate::model) struct Later {
    /// The operations: a record of one of them in a buffer's history is left to the log.
    pub(in crate::model) ops: FastSet<Epoch>,
    /// The entries not ordered after the launch, in issue order.
    pub(in crate::model) unordered: Vec<Logged>,
}

#[derive(Default)]
struct Window {
    seq: u64,
    /// In issue order.
    pending: Vec<Pending>,
    /// In issue order.
    log: VecDeque<Logged>,
}

impl Window {
    fn knew(&self, clock: &VectorClock) -> Vec<(Slot, u32)> {
        let mut knew: Vec<(Slot, u32)> = Vec::new();
        for p in &self.pending {
            if !knew.iter().any(|&(s, _)| s == p.op.epoch.slot) {
                knew.push((p.op.epoch.slot, clock.get(p.op.epoch.slot)));
            }
        }
        knew
    }

    fn push(&mut self, entry: Logged, dropped: &AtomicU64) {
        // Keep issue order: a launch read late is logged under its issue position.
        let at = self.log.partition_point(|l| l.seq <= entry.seq);
        self.log.insert(at, entry);
        self.bound(dropped);
    }

    /// Logs `entries`, of one issue position, after what is logged at or before it (one
    /// move of the entries after them, not one per entry).
    fn push_all(&mut self, entries: Vec<Logged>, dropped: &AtomicU64) {
        let Some(seq) = entries.first().map(|e| e.seq) else { return };
        let tail = self.log.split_off(self.log.partition_point(|l| l.seq <= seq));
        self.log.extend(entries);
        self.log.extend(tail);
        self.bound(dropped);
    }

    /// Past [`MAX_LOGGED`], the oldest entries go (and are counted).
    fn bound(&mut self, dropped: &AtomicU64) {
        while self.log.len() > MAX_LOGGED {
            self.log.pop_front();
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets what no pending launch can be checked against.
    fn prune(&mut self) {
        match self.pending.iter().map(|p| p.seq).min() {
            None => self.log.clear(),
            Some(oldest) => {
                while self.log.front().is_some_and(|l| l.seq < oldest) {
                    self.log.pop_front();
                }
            }
        }
    }
}

/// The pending launches and the accesses issued since the oldest of them.
#[derive(Default)]
pub struct PendingLaunches {
    pending: AtomicUsize,
    window: Mutex<Window>,
    dropped: AtomicU64,
}

impl PendingLaunches {
    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs an access of `bytes` (`[lo, hi)` and its residues) to the buffer `buffer` (or
    /// its free, `freed`) by `op` with clock `clock`, if a launch is pending.
    #[inline]
    pub fn observe(
        &self,
        (lo, hi, residues): (u64, u64, u64),
        mode: Mode,
        buffer: u64,
        freed: Option<BufferFacts>,
        op: OpRecord,
        clock: &VectorClock,
    ) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut window = self.window();
        if window.pending.is_empty() {
            return;
        }
        window.seq += 1;
        let entry = Logged { seq: window.seq, lo, hi, residues, mode, freed, buffer, op, knew: window.knew(clock) };
        window.push(entry, &self.dropped);
    }

    /// Issues a launch to be measured: pending as `ticket` until [`PendingLaunches::take`].
    #[allow(clippy::too_many_arguments)]
    pub(in crate::model) fn pend(
        &self,
        ticket: u64,
        op: OpRecord,
        (clock, overlap): (VectorClock, Overlap),
        next_buffer: u64,
        met: Vec<Arc<Buffer>>,
        guess: Vec<Access>,
        learn: Option<Learning>,
    ) {
        let mut window = self.window();
        window.seq += 1;
        let seq = window.seq;
        let issued_at = crate::model::peers::now();
        window.pending.push(Pending { ticket, seq, op, clock, overlap, next_buffer, met, issued_at, guess, learn });
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether any launch is pending, read without the lock.
    pub(in crate::model) fn any(&self) -> bool {
        self.pending.load(Ordering::Acquire) != 0
    }

    /// The tickets of pending launches that `done` says completed.
    pub(in crate::model) fn completed(&self, done: impl Fn(Epoch) -> bool) -> Vec<u64> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.window().pending.iter().filter(|p| done(p.op.epoch)).map(|p| p.ticket).collect()
    }

    /// The tickets of every pending launch.
    pub(in crate::model) fn tickets(&self) -> Vec<u64> {
        self.window().pending.iter().map(|p| p.ticket).collect()
    }

    /// The launch pending as `ticket`.
    pub(in crate::model) fn op_of(&self, ticket: u64) -> Option<OpRecord> {
        self.window().pending.iter().find(|p| p.ticket == ticket).map(|p| p.op)
    }

    /// Logged accesses forgotten for the log's bound.
    pub(in crate::model) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Ends the wait of the launch pending as `ticket`: it, and what was logged after it.
    /// Only the entries not ordered after it are copied out: in a program that orders its
    /// streams, next to none of the thousands a step logs.
    pub(in crate::model) fn take(&self, ticket: u64) -> Option<(Pending, Later)> {
        let mut window = self.window();
        let at = window.pending.iter().position(|p| p.ticket == ticket)?;
        let pending = window.pending.remove(at);
        self.pending.fetch_sub(1, Ordering::AcqRel);
        let mut later = Later::default();
        let from = window.log.partition_point(|l| l.seq <= pending.seq);
        let mut last = None;
        for l in window.log.range(from..) {
            // An operation's accesses are logged together: one insert for them all.
            if last != Some(l.op.epoch) {
                later.ops.insert(l.op.epoch);
                last = Some(l.op.epoch);
            }
            if !l.after(pending.op.epoch) {
                later.unordered.push(l.clone());
            }
        }
        Some((pending, later))
    }

    /// Logs the accesses of `pending`, now measured, under its issue position, for the
    /// launches pending from before it (`buffer`: the id of the buffer an address was in,
    /// 0 if allocated after it), and forgets what no pending launch needs.
    pub(in crate::model) fn log_measured(&self, pending: &Pending, accesses: &[Access], buffer: impl Fn(u64) -> u64) {
        let mut window = self.window();
        // Only a launch pending from before it reads these entries (one from after it found
        // it pending and checked it); footprints mostly come in issue order, and then none is.
        if window.pending.iter().any(|p| p.seq < pending.seq) {
            let entries: Vec<Logged> = accesses
                .iter()
                .map(|a| Logged {
                    seq: pending.seq,
                    lo: a.addr,
                    hi: a.addr + a.len.max(1),
                    residues: a.residues,
                    mode: a.mode,
                    freed: None,
                    buffer: buffer(a.addr),
                    op: pending.op,
                    knew: window.knew(pending.clock_of(a)),
                })
                .collect();
            window.push_all(entries, &self.dropped);
        }
        window.prune();
    }
}

/// `ranges` (sorted, of one buffer) joined across their smallest gaps until at most `cap`
/// remain; a joined range takes the union of the modes it covers, and a place around the
/// wait only where its parts agree.
pub(in crate::model) fn join_closest(ranges: &[Access], cap: usize) -> Vec<Access> {
    let mut out: Vec<Access> = ranges.to_vec();
    while out.len() > cap {
        let (i, _) = out
            .windows(2)
            .enumerate()
            .min_by_key(|(_, w)| w[1].addr.saturating_sub(w[0].addr + w[0].len))
            .expect("two or more");
        let (a, b) = (out[i], out[i + 1]);
        let hi = (a.addr + a.len).max(b.addr + b.len);
        let mode = if a.mode == b.mode { a.mode } else { Mode::ReadWrite };
        let exact = a.exact && b.exact;
        let place = if a.place == b.place { a.place } else { WaitPlace::Unknown };
        out[i] = Access { exact, place, residues: a.residues | b.residues, ..Access::new(a.addr, hi - a.addr, mode) };
        out.remove(i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::Origin;
    use crate::model::residue::DENSE;

    fn op(slot: Slot, time: u32) -> OpRecord {
        OpRecord::new(&Origin::test("cuLaunchKernel", 1), None, Epoch::new(slot, time))
    }

    fn clock(slot: Slot, time: u32) -> VectorClock {
        let mut clock = VectorClock::default();
        clock.set(slot, time);
        clock
    }

    /// Launches pending as `tickets`, each on a slot of its own (1, 2, ...), at time 1.
    fn pending(tickets: &[u64]) -> PendingLaunches {
        let launches = PendingLaunches::default();
        for (slot, &ticket) in (1..).zip(tickets) {
            launches.pend(ticket, op(slot, 1), (clock(slot, 1), Overlap::None), 1, Vec::new(), Vec::new(), None);
        }
        launches
    }

    /// A write of 8 bytes at `lo` on slot 9, which knows no pending launch.
    fn observe(launches: &PendingLaunches, lo: u64) {
        launches.observe((lo, lo + 8, DENSE), Mode::Write, 0, None, op(9, 1), &VectorClock::default());
    }

    fn starts(logged: &[Logged]) -> Vec<u64> {
        logged.iter().map(|l| l.lo).collect()
    }

    #[test]
    fn pending_launches_are_found_by_ticket_and_by_completion() {
        let launches = pending(&[]);
        assert!(launches.completed(|_| true).is_empty());
        let launches = pending(&[7, 8]);
        assert_eq!(launches.completed(|epoch| epoch.slot == 2), [8]);
        assert_eq!(launches.tickets(), [7, 8]);
        assert_eq!(launches.op_of(8).map(|op| op.epoch), Some(Epoch::new(2, 1)));
        assert!(launches.op_of(9).is_none());
        assert_eq!(launches.take(7).map(|(p, _)| p.op.epoch), Some(Epoch::new(1, 1)));
        assert_eq!(launches.tickets(), [8]);
    }

    /// Each launch is given what was issued after it, in issue order; a launch read while
    /// an earlier one is pending is logged for it under its own issue position; and what no
    /// pending launch needs any more is forgotten, taking no room from the log's bound.
    #[test]
    fn the_log_keeps_in_issue_order_what_pending_launches_need_and_only_that() {
        let launches = pending(&[7]);
        observe(&launches, 0);
        launches.pend(8, op(2, 1), (clock(2, 1), Overlap::None), 1, Vec::new(), Vec::new(), None);
        observe(&launches, 8);
        let (eight, later) = launches.take(8).expect("pending");
        assert_eq!(starts(&later.unordered), [8]);
        launches.log_measured(&eight, &[Access::new(0x100, 16, Mode::Read)], |_| 5);
        launches.pend(9, op(3, 1), (clock(3, 1), Overlap::None), 1, Vec::new(), Vec::new(), None);
        let (seven, later) = launches.take(7).expect("pending");
        assert_eq!(starts(&later.unordered), [0, 0x100, 8]);
        let measured = &later.unordered[1];
        assert_eq!(
            (measured.hi, measured.mode, measured.buffer, measured.op.epoch),
            (0x110, Mode::Read, 5, eight.op.epoch)
        );
        launches.log_measured(&seven, &[], |_| 0);
        // Launch 9 alone is pending: what was logged before it is gone.
        for i in 0..MAX_LOGGED as u64 {
            observe(&launches, 0x1000 + i);
        }
        assert_eq!(launches.dropped(), 0);
        assert_eq!(launches.take(9).map(|(_, later)| later.unordered.len()), Some(MAX_LOGGED));
    }

    /// Past the log's bound the oldest accesses go, counted; the latest stay.
    #[test]
    fn past_its_bound_the_log_forgets_its_oldest_accesses_and_counts_them() {
        let launches = pending(&[7]);
        for i in 0..MAX_LOGGED as u64 + 2 {
            observe(&launches, i);
        }
        assert_eq!(launches.dropped(), 2);
        let (_, later) = launches.take(7).expect("pending");
        let later = later.unordered;
        assert_eq!(later.len(), MAX_LOGGED);
        assert_eq!((later[0].lo, later[MAX_LOGGED - 1].lo), (2, MAX_LOGGED as u64 + 1));
        // A measured launch logged for an earlier one, all its ranges at once: the same bound.
        let launches = pending(&[7]);
        launches.pend(8, op(2, 1), (clock(2, 1), Overlap::None), 1, Vec::new(), Vec::new(), None);
        for i in 0..MAX_LOGGED as u64 - 1 {
            observe(&launches, 0x1000 + i);
        }
        let (eight, _) = launches.take(8).expect("pending");
        let ranges =
            [Access::new(0x10, 8, Mode::Read), Access::new(0x20, 8, Mode::Read), Access::new(0x30, 8, Mode::Read)];
        launches.log_measured(&eight, &ranges, |_| 0);
        assert_eq!(launches.dropped(), 2);
        let (_, later) = launches.take(7).expect("pending");
        assert_eq!(later.unordered.len(), MAX_LOGGED);
        assert_eq!(starts(&later.unordered[..2]), [0x30, 0x1000], "issued before the rest, the oldest gone");
    }

    /// A joined range reads and writes what its parts did, and is exact only if both were.
    #[test]
    fn a_joined_range_takes_the_union_of_its_parts_modes_and_their_exactness() {
        let inexact = Access { exact: false, ..Access::new(26, 4, Mode::Read) };
        let ranges =
            [Access::new(0, 4, Mode::Read), Access::new(6, 4, Mode::Read), Access::new(20, 4, Mode::Write), inexact];
        let joined = join_closest(&ranges, 2);
        let spans: Vec<_> = joined.iter().map(|a| (a.addr, a.len, a.mode, a.exact)).collect();
        assert_eq!(spans, [(0, 10, Mode::Read, true), (20, 10, Mode::ReadWrite, false)]);
    }

    fn logged(seq: u64) -> Logged {
        let op = op(1, seq as u32);
        Logged { seq, lo: 0, hi: 8, residues: DENSE, mode: Mode::Write, freed: None, buffer: 1, op, knew: Vec::new() }
    }

    #[test]
    fn the_log_keeps_issue_order_when_a_launch_is_read_late() {
        // The log is pruned from its front and bounded by dropping its front: both need the
        // oldest first, whatever order launches were read in.
        let (mut window, dropped) = (Window::default(), AtomicU64::new(0));
        for seq in [1, 3, 4, 2] {
            window.push(logged(seq), &dropped);
        }
        let seqs: Vec<u64> = window.log.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
    }
}
