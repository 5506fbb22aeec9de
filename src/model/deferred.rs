//! Launches whose accesses are known only after they ran: measured footprints.
//!
//! The model checks each operation when it is issued, but a measured launch's footprint
//! ([`Model::launch_deferred`]) arrives once the program has synchronized with it
//! ([`Model::launch_measured`]), after other operations were issued and checked without it.
//! A launch P is therefore checked in two halves when its footprint comes:
//!
//! - against what was issued *before* it: the buffers' histories, with the clock P had at
//!   issue (kept with it). A record issued after P is left to the second half, even if it
//!   is in a history by now.
//! - against what was issued *after* it, while it was pending: every access checked in that
//!   window is kept in a log ([`Window`]), with, for each stream that had pending launches,
//!   how far the access's clock knew that stream. P and a logged access are ordered exactly
//!   when the access knew P's stream up to P; frees are logged too.
//!
//! Measured launches that complete out of issue order are logged when read, under their
//! issue position, so that each pair of measured launches is checked exactly once, by the
//! one issued later or, if it was read first, by the earlier one against its log entry.
//!
//! What may be missed (never invented): a record issued before P and concurrent with it but
//! since dropped from a history (overwritten by a write ordered after P, or the history's
//! bound); logged accesses beyond the log's bound ([`MAX_LOGGED`], counted in
//! [`Model::deferred_dropped`]). A buffer allocated after P was issued is skipped, in the
//! histories and in the log: P's bytes there were a freed predecessor's, and the free was
//! logged.
//!
//! Cost: nothing is logged while no launch is pending (one atomic load per access).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::hash::FastSet;

use super::buffers::Found;
use super::clock::{Epoch, Slot, VectorClock};
use super::definition::NodeKind;
use super::learnt::Learning;
use super::measured::Footprint;
use super::op::{Access, Mode, OpRecord, StackId, ThreadId};
use super::race::{Action, BufferFacts, Hazard, NoteKind, Race, RaceKind, Side};
use super::rules::work::Checked;
use super::streams::StreamRef;
use super::{Model, Work};

/// Accesses kept in the log at most; beyond, the oldest go (and races with them may be
/// missed, counted).
pub const MAX_LOGGED: usize = 1 << 16;

/// Ranges of one launch in one buffer at most: more are joined across their smallest gaps
/// (a cover, never a loss), keeping the buffer's history compact.
pub const MAX_RANGES_PER_BUFFER: usize = 8;

/// A measured launch waiting for its footprint.
struct Pending {
    ticket: u64,
    /// Its place in the issue order.
    seq: u64,
    op: OpRecord,
    clock: VectorClock,
    /// Buffers numbered from here were allocated after it was issued.
    next_buffer: u64,
    /// What its parameters say (the union with what is measured: memory reached without a
    /// patch point, such as Hopper's bulk tensor copies, is seen by no measure).
    guess: Vec<Access>,
    /// Its kernel and words, to learn its footprint from ([`super::learnt`]), in
    /// `footprint=learn`.
    learn: Option<Learning>,
}

/// An access (or a free) issued while some launch was pending.
#[derive(Clone, Debug)]
struct Logged {
    seq: u64,
    lo: u64,
    hi: u64,
    mode: Mode,
    /// A free: the buffer it freed, as it was (freed host memory is forgotten at once).
    freed: Option<BufferFacts>,
    /// The id of the buffer the bytes were in (0: older than any launch pending then). A
    /// launch pending from before that buffer was allocated had its bytes in a predecessor
    /// at the same address, whose free is logged: the two are not checked.
    buffer: u64,
    op: OpRecord,
    /// For each stream (slot) with pending launches then: how far this access's clock knew it.
    knew: Vec<(Slot, u32)>,
}

impl Logged {
    /// Whether the launch at `epoch` happens before this access.
    fn after(&self, epoch: Epoch) -> bool {
        self.knew.iter().any(|&(slot, time)| slot == epoch.slot && epoch.time <= time)
    }
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
        if self.log.len() > MAX_LOGGED {
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
pub struct Deferred {
    pending: AtomicUsize,
    window: Mutex<Window>,
    dropped: AtomicU64,
}

impl Deferred {
    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs an access to the buffer `buffer` (or its free, `freed`) by `op` with clock
    /// `clock`, if a launch is pending.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn observe(
        &self,
        lo: u64,
        hi: u64,
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
        let entry = Logged { seq: window.seq, lo, hi, mode, freed, buffer, op, knew: window.knew(clock) };
        window.push(entry, &self.dropped);
    }
}

impl Model {
    /// A kernel launch on `stream` whose footprint will be measured: it is issued now (its
    /// clock taken) and checked when [`Model::launch_measured`] gives its accesses. `work`'s
    /// accesses are what its parameters say. Returns false when the stream captures: the
    /// launch became a graph node with those accesses, and no footprint will come. `learn`:
    /// what to learn its footprint under.
    pub fn launch_deferred(&self, stream: StreamRef, work: Work<'_>, ticket: u64, learn: Option<Learning>) -> bool {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Work { accesses: work.accesses.to_vec() }, &work.origin, work.kernel)
        {
            return false;
        }
        let (state, epoch) = self.issue(&stream);
        let op = OpRecord::new(&work.origin, work.kernel, epoch);
        let mut window = self.deferred.window();
        window.seq += 1;
        let pending = Pending {
            ticket,
            seq: window.seq,
            op,
            clock: state.clock.clone(),
            next_buffer: self.next_buffer.load(Ordering::Relaxed),
            guess: work.accesses.to_vec(),
            learn,
        };
        window.pending.push(pending);
        self.deferred.pending.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// The tickets of pending launches the host is now ordered after (they completed): their
    /// footprints can be read.
    pub fn completed_launches(&self) -> Vec<u64> {
        if self.deferred.pending.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let window = self.deferred.window();
        window.pending.iter().filter(|p| p.op.epoch.time <= self.host.get(p.op.epoch.slot)).map(|p| p.ticket).collect()
    }

    /// The tickets of every pending launch (at exit: read what can be).
    pub fn pending_launches(&self) -> Vec<u64> {
        self.deferred.window().pending.iter().map(|p| p.ticket).collect()
    }

    /// A note about footprints; `ticket` names the pending launch it concerns, if one does.
    pub fn footprint_note(&self, kind: NoteKind, subject: u64, ticket: Option<u64>) {
        let pending = ticket.and_then(|t| self.deferred.window().pending.iter().find(|p| p.ticket == t).map(|p| p.op));
        let op = pending.unwrap_or(OpRecord {
            api: "footprint",
            kernel: None,
            epoch: Epoch::default(),
            thread: ThreadId(0),
            site: StackId(0),
        });
        self.notes.add(kind, op, subject);
    }

    /// Logged accesses forgotten for the log's bound.
    pub fn deferred_dropped(&self) -> u64 {
        self.deferred.dropped.load(Ordering::Relaxed)
    }

    /// The measured accesses of the pending launch `ticket` (None: it could not be measured;
    /// its parameters' accesses stand alone). Checks it against what was issued before and
    /// after it, then records it.
    pub fn launch_measured(&self, ticket: u64, measured: Option<Footprint<'_>>) {
        let (pending, later) = {
            let mut window = self.deferred.window();
            let Some(at) = window.pending.iter().position(|p| p.ticket == ticket) else {
                return;
            };
            let pending = window.pending.remove(at);
            self.deferred.pending.fetch_sub(1, Ordering::AcqRel);
            let later: Vec<Logged> = window.log.iter().filter(|l| l.seq > pending.seq).cloned().collect();
            (pending, later)
        };
        let accesses = self.union(&pending, measured);
        if let (Some(learning), Some(measured)) = (&pending.learn, measured) {
            self.learn(learning, &pending.guess, measured, pending.op);
        }
        let later_ops: FastSet<Epoch> = later.iter().map(|l| l.op.epoch).collect();
        let mut found = Vec::new();
        for access in &accesses {
            let checked = Checked::Late { next_buffer: pending.next_buffer, later: &later_ops };
            self.access(access, &pending.clock, pending.op, checked, &mut found);
        }
        // What was issued after it, unordered with it.
        for entry in &later {
            if entry.after(pending.op.epoch) || entry.buffer >= pending.next_buffer {
                continue;
            }
            for access in accesses.iter().filter(|a| a.addr < entry.hi && entry.lo < a.addr + a.len.max(1)) {
                if entry.freed.is_none() && !access.mode.conflicts_with(entry.mode) {
                    continue;
                }
                let facts = match (entry.freed, self.buffers.find(entry.lo)) {
                    (Some(facts), _) => facts,
                    (None, Found::Live(b) | Found::Freed(b)) => BufferFacts::of(&b),
                    (None, Found::Nothing) => continue,
                };
                let first = Side {
                    op: pending.op,
                    action: Action::Access { mode: access.mode, lo: access.addr, hi: access.addr + access.len.max(1) },
                };
                let (kind, hazard, action) = if entry.freed.is_some() {
                    (RaceKind::FreeRace, None, Action::Free)
                } else {
                    (
                        RaceKind::CrossStream,
                        Some(Hazard::between(access.mode, entry.mode)),
                        Action::Access { mode: entry.mode, lo: entry.lo, hi: entry.hi },
                    )
                };
                found.push(Race { kind, hazard, buffer: facts, first, second: Side { op: entry.op, action } });
                break;
            }
        }
        // Logged under its issue position for launches pending from before it.
        {
            let mut window = self.deferred.window();
            if !window.pending.is_empty() {
                let knew = window.knew(&pending.clock);
                for a in &accesses {
                    // Its bytes were in a buffer allocated before it, whatever is there now.
                    let buffer = self.buffer_id(a.addr).filter(|&id| id < pending.next_buffer).unwrap_or(0);
                    let entry = Logged {
                        seq: pending.seq,
                        lo: a.addr,
                        hi: a.addr + a.len.max(1),
                        mode: a.mode,
                        freed: None,
                        buffer,
                        op: pending.op,
                        knew: knew.clone(),
                    };
                    window.push(entry, &self.deferred.dropped);
                }
            }
            window.prune();
        }
        self.publish(found);
    }

    /// What the launch is taken to have touched: its measured ranges and cover, joined per
    /// buffer to at most [`MAX_RANGES_PER_BUFFER`], and its parameters' accesses to buffers
    /// the measure did not see.
    fn union(&self, pending: &Pending, measured: Option<Footprint<'_>>) -> Vec<Access> {
        let Some(measured) = measured else {
            return pending.guess.clone();
        };
        let mut out: Vec<Access> = measured.ranges.iter().copied().chain(measured.cover).collect();
        out.sort_unstable_by_key(|a| a.addr);
        let mut compact: Vec<Access> = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            let id = self.buffer_id(out[i].addr);
            let mut j = i + 1;
            while j < out.len() && self.buffer_id(out[j].addr) == id {
                j += 1;
            }
            compact.extend(join_closest(&out[i..j], if id.is_some() { MAX_RANGES_PER_BUFFER } else { usize::MAX }));
            i = j;
        }
        for g in &pending.guess {
            let id = self.buffer_id(g.addr);
            if id.is_some() && !compact.iter().any(|m| self.buffer_id(m.addr) == id) {
                compact.push(*g);
            }
        }
        compact
    }

    fn buffer_id(&self, addr: u64) -> Option<u64> {
        match self.buffers.find(addr) {
            Found::Live(b) | Found::Freed(b) => Some(b.id),
            Found::Nothing => None,
        }
    }
}

/// `ranges` (sorted, of one buffer) joined across their smallest gaps until at most `cap`
/// remain per mode; a joined range takes the union of the modes it covers.
fn join_closest(ranges: &[Access], cap: usize) -> Vec<Access> {
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
        out[i] = Access { addr: a.addr, len: hi - a.addr, mode, exact: a.exact && b.exact, slot: None };
        out.remove(i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::buffers::MemoryKind;
    use crate::model::op::{HostEffect, KernelId, Origin};
    use crate::model::{Alloc, FreeOn};

    fn read(addr: u64, len: u64) -> Access {
        Access::new(addr, len, Mode::Read)
    }

    #[test]
    fn ranges_beyond_the_cap_are_joined_across_the_smallest_gaps() {
        let ranges = [read(0, 4), read(8, 4), read(100, 4), read(1000, 4)];
        let joined = join_closest(&ranges, 2);
        assert_eq!(joined.iter().map(|a| (a.addr, a.addr + a.len)).collect::<Vec<_>>(), vec![(0, 104), (1000, 1004)]);
        assert_eq!(join_closest(&ranges, 8).len(), 4);
    }

    const BUFFER: u64 = 0x10_0000;
    const S1: StreamRef = StreamRef::Handle(0x10);
    const S2: StreamRef = StreamRef::Handle(0x20);

    /// Two streams, a device buffer, and a launch on the first stream, pending as ticket 7,
    /// whose parameters say it touches the buffer's first 8 bytes in `mode`.
    fn a_pending_launch(mode: Mode) -> Model {
        let model = Model::default();
        for s in [0x10, 0x20] {
            model.stream_created(s, 1, true, &Origin::test("cuStreamCreate", 1));
        }
        model.alloc(buffer(), None, &Origin::test("cuMemAlloc", 2));
        let params = [Access::new(BUFFER, 8, mode)];
        let origin = Origin::test("cuLaunchKernel", 3);
        let work = Work { origin, kernel: Some(KernelId(1)), accesses: &params, host: HostEffect::None };
        assert!(model.launch_deferred(S1, work, 7, None));
        model
    }

    fn buffer() -> Alloc {
        Alloc { base: BUFFER, size: 256, kind: MemoryKind::Device, ctx: 1 }
    }

    /// A measured launch's bytes, read after its buffer was freed and another allocated at
    /// the same address (and used), were the freed one's: the new buffer is not checked
    /// against it (its allocation is not ordered before the launch, which is no race).
    #[test]
    fn a_late_footprint_skips_buffers_allocated_after_its_launch() {
        let model = a_pending_launch(Mode::Write);
        model.free(BUFFER, FreeOn::Stream(S1), &Origin::test("cuMemFreeAsync", 4));
        model.alloc(buffer(), Some(S2), &Origin::test("cuMemAllocAsync", 5));
        let write = [Access::new(BUFFER, 8, Mode::Write)];
        let origin = Origin::test("cuMemsetD8Async", 6);
        model.work(S2, Work { origin, kernel: None, accesses: &write, host: HostEffect::None });
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(BUFFER, 256, Mode::Write)], cover: None }));
        assert!(model.races().is_empty(), "{:?}", model.races());
    }

    /// A measured launch whose buffer another stream freed while it was pending: one
    /// free-race (the log's), not also a use-after-free of the freed buffer's history.
    #[test]
    fn a_free_issued_after_a_pending_launch_is_a_free_race_only() {
        let model = a_pending_launch(Mode::Read);
        model.free(BUFFER, FreeOn::Stream(S2), &Origin::test("cuMemFreeAsync", 4));
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(BUFFER, 64, Mode::Read)], cover: None }));
        let kinds: Vec<RaceKind> = model.races().iter().map(|r| r.race.kind).collect();
        assert_eq!(kinds, vec![RaceKind::FreeRace]);
    }
}
