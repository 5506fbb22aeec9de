//! The rule of a measured launch: issued at once, checked when its footprint is read against
//! what was issued before it (with its clock at issue) and after it (the log of [`crate::model::footprint::pending`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::model::buffers::{Buffer, Found};
use crate::model::clock::Epoch;
use crate::model::definition::NodeKind;
use crate::model::footprint::learnt::Learning;
use crate::model::footprint::measured::Footprint;
use crate::model::footprint::pending::{join_closest, Pending, MAX_RANGES_PER_BUFFER};
use crate::model::op::{Access, OpRecord, StackId, ThreadId, WaitPlace};
use crate::model::race::{Action, BufferFacts, Hazard, NoteKind, Race, RaceKind, Side};
use crate::model::residue;
use crate::model::streams::StreamRef;
use crate::model::{Model, Work};
use crate::phases::{self, Phase};

use crate::model::rules::work::Checked;

impl Model {
    /// A kernel launch on `stream` whose footprint will be measured: it is issued now (its
    /// clock taken) and checked when [`Model::launch_measured`] gives its accesses. `work`'s
    /// accesses are what its parameters say; `learn`: what to learn its footprint under.
    /// Returns the launch's epoch, or None when the stream captures: the launch became a
    /// graph node with those accesses, and no footprint will come.
    pub fn launch_pending(
        &self,
        stream: StreamRef,
        work: Work<'_>,
        ticket: u64,
        learn: Option<Learning>,
    ) -> Option<Epoch> {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Work { accesses: work.accesses.to_vec() }, &work.origin, work.kernel)
        {
            return None;
        }
        let (mut state, epoch) = self.issue(&stream);
        let op = OpRecord::new(&work.origin, work.kernel, epoch);
        let next_buffer = self.next_buffer.load(Ordering::Relaxed);
        let overlap = self.overlapping(&mut state, stream.slot, op, true);
        let met = self.met_buffers(work.accesses);
        self.pending.pend(ticket, op, (state.clock.clone(), overlap), next_buffer, met, work.accesses.to_vec(), learn);
        Some(epoch)
    }

    /// The live buffers a launch's parameters point into as it is issued (once each).
    pub(in crate::model) fn met_buffers(&self, guess: &[Access]) -> Vec<Arc<Buffer>> {
        let mut met: Vec<Arc<Buffer>> = Vec::new();
        for pointer in guess {
            if let Found::Live(b) = self.buffers.find(pointer.addr) {
                if !met.iter().any(|m| m.id == b.id) {
                    met.push(b);
                }
            }
        }
        met
    }

    /// The tickets of pending launches the host is now ordered after (they completed): their
    /// footprints can be read.
    pub fn completed_launches(&self) -> Vec<u64> {
        self.pending.completed(|epoch| epoch.time <= self.host.get(epoch.slot))
    }

    /// Whether a measured launch waits for its footprint. Measured launches are told at once,
    /// never queued in the shim's batch, so a model not yet told the batch knows them all.
    pub fn launches_pending(&self) -> bool {
        self.pending.any()
    }

    /// The tickets of every pending launch (at exit: read what can be).
    pub fn pending_launches(&self) -> Vec<u64> {
        self.pending.tickets()
    }

    /// A note about footprints; `ticket` names the pending launch it concerns, if one does.
    pub fn footprint_note(&self, kind: NoteKind, subject: u64, ticket: Option<u64>) {
        let pending = ticket.and_then(|t| self.pending.op_of(t));
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
    pub fn pending_log_dropped(&self) -> u64 {
        self.pending.dropped()
    }

    /// The measured accesses of the pending launch `ticket` (None: it could not be measured;
    /// its parameters' accesses stand alone). Checks it against what was issued before and
    /// after it, then records it.
    pub fn launch_measured(&self, ticket: u64, measured: Option<Footprint<'_>>) {
        let Some((pending, later)) = self.pending.take(ticket) else {
            return;
        };
        let accesses = self.taken(&pending, measured);
        self.note_unplaced(&pending.overlap, &accesses, pending.op);
        self.node_measured(ticket, measured.is_some().then_some(&accesses[..]));
        self.host_accesses_measured(pending.op, measured.is_some().then_some(&accesses[..]));
        if let (Some(learning), Some(measured)) = (&pending.learn, measured) {
            let _timer = phases::start(Phase::FootprintLearn);
            self.learn(learning, &pending, measured);
        }
        let checking = phases::start(Phase::FootprintCheck);
        let mut found = Vec::new();
        for access in &accesses {
            let checked = Checked::Late {
                next_buffer: pending.next_buffer,
                met: &pending.met,
                later: &later.ops,
                issued_at: pending.issued_at,
            };
            self.access(access, pending.clock_of(access), pending.op, checked, &mut found);
        }
        // What was issued after it, unordered with it.
        for entry in &later.unordered {
            if entry.buffer >= pending.next_buffer {
                continue;
            }
            let shares = |a: &&Access| {
                let (lo, hi) = (a.addr.max(entry.lo), (a.addr + a.len.max(1)).min(entry.hi));
                lo < hi && (entry.freed.is_some() || residue::meet(a.residues, entry.residues, lo, hi))
            };
            for access in accesses.iter().filter(shares) {
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
        drop(checking);
        // Logged under its issue position for launches pending from before it; its bytes
        // were in a buffer allocated before it, whatever is there now.
        self.pending.log_measured(&pending, &accesses, |addr| self.buffer_id_met(&pending, addr).unwrap_or(0));
        self.publish(found);
    }

    /// What the launch is taken to have touched: its measured ranges and its cover's part in
    /// each buffer its pointers met, joined per buffer and place around its kernel's
    /// grid-dependency wait to at most [`MAX_RANGES_PER_BUFFER`]; of its parameters'
    /// accesses, only those the measure is blind to (pointers inside tensor maps, which bulk
    /// copies follow). A measurement replaces the guess: a pointer the kernel did not follow
    /// is no access.
    fn taken(&self, pending: &Pending, measured: Option<Footprint<'_>>) -> Vec<Access> {
        let Some(measured) = measured else {
            return pending.guess.clone();
        };
        // A cover spans everything between the bytes that found no entry: other tensors, a
        // pinned staging buffer. Only its part in the buffers it reaches is taken, as a learnt
        // cover's is (docs/footprints.md#exact-every-launch-measured).
        let whole_pointer = |b: &Buffer| pending.guess.iter().any(|g| g.exact && b.base <= g.addr && g.addr < b.end());
        let in_reach = measured.covers.iter().flat_map(|&c| {
            let reached = pending.met.iter().filter(|b| measured.cover_reaches((b.base, b.end()), whole_pointer(b)));
            reached.filter_map(move |b| {
                let (lo, hi) = (c.addr.max(b.base), (c.addr + c.len).min(b.end()));
                (lo < hi).then(|| Access { addr: lo, len: hi - lo, ..c })
            })
        });
        let mut out: Vec<Access> = measured.ranges.iter().copied().chain(in_reach).collect();
        out.sort_unstable_by_key(|a| a.addr);
        // Each range's buffer, looked up once.
        let ids: Vec<Option<u64>> = out.iter().map(|a| self.buffer_id_met(pending, a.addr)).collect();
        let mut compact: Vec<Access> = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            let id = ids[i];
            let mut j = i + 1;
            while j < out.len() && ids[j] == id {
                j += 1;
            }
            let cap = if id.is_some() { MAX_RANGES_PER_BUFFER } else { usize::MAX };
            // Joined only with ranges of their own side of the wait: a range over both would
            // be taken as ordered, and what the kernel touched before its wait unchecked.
            for place in [WaitPlace::Unknown, WaitPlace::Before, WaitPlace::After] {
                let side: Vec<Access> = out[i..j].iter().filter(|a| a.place == place).copied().collect();
                if !side.is_empty() {
                    compact.extend(join_closest(&side, cap));
                }
            }
            i = j;
        }
        compact.extend(pending.guess.iter().filter(|g| g.blind));
        compact
    }

    /// The buffer `addr` was in when the pending launch was issued: one its pointers met,
    /// else one allocated before it that is still known.
    pub(in crate::model) fn buffer_met(&self, pending: &Pending, addr: u64) -> Option<Arc<Buffer>> {
        if let Some(b) = pending.met_at(addr) {
            return Some(b.clone());
        }
        match self.buffers.find(addr) {
            Found::Live(b) | Found::Freed(b) if b.id < pending.next_buffer => Some(b),
            _ => None,
        }
    }

    fn buffer_id_met(&self, pending: &Pending, addr: u64) -> Option<u64> {
        self.buffer_met(pending, addr).map(|b| b.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::buffers::MemoryKind;
    use crate::model::op::{GridWait, HostEffect, KernelId, Mode, Origin};
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
        pend(&model, S1, 7, 3, mode);
        model
    }

    /// A launch on `on`, made at call `at`, pending as `ticket`, whose parameters say it
    /// touches the buffer's first 8 bytes in `mode`.
    fn pend(model: &Model, on: StreamRef, ticket: u64, at: u32, mode: Mode) {
        let params = [Access::new(BUFFER, 8, mode)];
        let origin = Origin::test("cuLaunchKernel", at);
        let work = Work { origin, kernel: Some(KernelId(1)), accesses: &params, host: HostEffect::None };
        assert!(model.launch_pending(on, work, ticket, None).is_some());
    }

    fn buffer() -> Alloc {
        Alloc { base: BUFFER, size: 256, kind: MemoryKind::Device, ctx: 1 }
    }

    /// A memset of the buffer's first 8 bytes on `on`, made at call `at`.
    fn memset(model: &Model, on: StreamRef, at: u32) {
        let write = [Access::new(BUFFER, 8, Mode::Write)];
        let origin = Origin::test("cuMemsetD8Async", at);
        model.work(on, Work { origin, kernel: None, accesses: &write, host: HostEffect::None });
    }

    /// A launch pending on a second stream, while one on the first stream was pending
    /// already: what its own stream does next is ordered after it (the log knows how far
    /// each stream with pending launches was known, not only the first one's).
    #[test]
    fn what_follows_a_pending_launch_on_its_stream_is_ordered_after_it_whatever_else_is_pending() {
        let model = a_pending_launch(Mode::Read);
        pend(&model, S2, 8, 4, Mode::Write);
        memset(&model, S2, 5);
        model.launch_measured(8, Some(Footprint { ranges: &[Access::new(BUFFER, 8, Mode::Write)], covers: &[] }));
        assert!(model.races().is_empty(), "{:?}", model.races());
    }

    /// An overflowed table's cover is taken in the buffers the launch's pointers met only: a
    /// write on another stream to a buffer between them (a pinned staging buffer) is no race
    /// with it, a write to one of them is. A field's buffer (perhaps a stale field's) takes
    /// the cover only where a range was measured in it.
    #[test]
    fn a_cover_is_taken_in_the_buffers_the_launch_was_pointed_at() {
        let cases = [
            (BUFFER + 0x1000, Access::new(BUFFER + 0x2000, 8, Mode::Read), None, false),
            (BUFFER + 0x2000, Access::new(BUFFER + 0x2000, 8, Mode::Read), None, true),
            (BUFFER + 0x2000, Access::field(BUFFER + 0x2000, 8), None, false),
            (
                BUFFER + 0x2000,
                Access::field(BUFFER + 0x2000, 8),
                Some(Access::new(BUFFER + 0x2080, 8, Mode::Read)),
                true,
            ),
        ];
        for (written, second, range, raced) in cases {
            let model = Model::default();
            for s in [0x10, 0x20] {
                model.stream_created(s, 1, true, &Origin::test("cuStreamCreate", 1));
            }
            for base in [BUFFER, BUFFER + 0x1000, BUFFER + 0x2000] {
                model.alloc(Alloc { base, ..buffer() }, None, &Origin::test("cuMemAlloc", 2));
            }
            let write = [Access::new(written, 8, Mode::Write)];
            let origin = Origin::test("cuMemsetD8Async", 3);
            model.work(S2, Work { origin, kernel: None, accesses: &write, host: HostEffect::None });
            let params = [Access::new(BUFFER, 8, Mode::Read), second];
            let origin = Origin::test("cuLaunchKernel", 4);
            let work = Work { origin, kernel: Some(KernelId(1)), accesses: &params, host: HostEffect::None };
            assert!(model.launch_pending(S1, work, 7, None).is_some());
            let cover = Access::new(BUFFER, 0x2100, Mode::Read);
            let ranges: Vec<Access> = range.into_iter().collect();
            model.launch_measured(7, Some(Footprint { ranges: &ranges, covers: &[cover] }));
            let race = model.races().iter().any(|r| r.race.kind == RaceKind::CrossStream);
            assert_eq!(race, raced, "{written:#x} {second:?}: {:?}", model.races());
        }
    }

    /// A measured launch's ranges in one buffer are joined to at most
    /// MAX_RANGES_PER_BUFFER (across their smallest gaps), in another buffer kept apart:
    /// what it is logged as for a launch pending from before it.
    #[test]
    fn a_measured_launch_keeps_at_most_its_cap_of_ranges_per_buffer() {
        let model = a_pending_launch(Mode::Read);
        let second = Alloc { base: BUFFER + 0x1000, ..buffer() };
        model.alloc(second, None, &Origin::test("cuMemAlloc", 4));
        pend(&model, S2, 8, 5, Mode::Write);
        let n = MAX_RANGES_PER_BUFFER as u64 + 4;
        let mut ranges: Vec<Access> = (0..n).map(|k| Access::new(BUFFER + 16 * k, 8, Mode::Write)).collect();
        ranges.push(Access::new(second.base, 8, Mode::Write));
        model.launch_measured(8, Some(Footprint { ranges: &ranges, covers: &[] }));
        let (_, later) = model.pending.take(7).expect("pending");
        let in_first = later.unordered.iter().filter(|l| l.lo < second.base).count();
        let in_second = later.unordered.iter().filter(|l| l.lo >= second.base).count();
        assert_eq!((in_first, in_second), (MAX_RANGES_PER_BUFFER, 1));
    }

    /// Two launches pending at once on two streams, both writing the buffer, read in the
    /// reverse of their issue order, the later one's record then overwritten by its own
    /// stream: the later one, read first, was logged for the earlier one, which finds the
    /// race with it (and with the write after it) when it is read.
    #[test]
    fn launches_pending_together_and_read_last_first_race_through_the_log() {
        let model = a_pending_launch(Mode::Write);
        pend(&model, S2, 8, 4, Mode::Write);
        let params = [Access::new(BUFFER, 8, Mode::Write)];
        let footprint = Footprint { ranges: &params, covers: &[] };
        model.launch_measured(8, Some(footprint));
        assert!(model.races().is_empty(), "{:?}", model.races());
        memset(&model, S2, 5);
        model.launch_measured(7, Some(footprint));
        let mut seconds: Vec<&str> = model.races().iter().map(|r| r.race.second.op.api).collect();
        seconds.sort_unstable();
        assert_eq!(seconds, ["cuLaunchKernel", "cuMemsetD8Async"]);
    }

    /// A measured launch's bytes, read after its buffer was freed and another allocated at
    /// the same address (and used), were the freed one's: the new buffer is not checked
    /// against it (its allocation is not ordered before the launch, which is no race).
    #[test]
    fn a_late_footprint_skips_buffers_allocated_after_its_launch() {
        let model = a_pending_launch(Mode::Write);
        model.free(BUFFER, FreeOn::Stream(S1), &Origin::test("cuMemFreeAsync", 4));
        model.alloc(buffer(), Some(S2), &Origin::test("cuMemAllocAsync", 5));
        memset(&model, S2, 6);
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(BUFFER, 256, Mode::Write)], covers: &[] }));
        assert!(model.races().is_empty(), "{:?}", model.races());
    }

    /// A pool's round: the second stream fills the buffer, a launch on the first reads it
    /// with no wait (pending), the buffer is freed on the second stream after it waits for
    /// the first, and its address handed out again before the footprint is read. The launch
    /// met the first buffer: its race with the fill is found there, not lost with the address.
    #[test]
    fn a_late_footprint_races_in_the_buffer_its_pointer_met_though_the_address_was_reused() {
        let model = Model::default();
        for s in [0x10, 0x20] {
            model.stream_created(s, 1, true, &Origin::test("cuStreamCreate", 1));
        }
        model.alloc(buffer(), Some(S2), &Origin::test("cuMemAllocAsync", 2));
        memset(&model, S2, 3);
        model.stream_synchronized(S2);
        memset(&model, S2, 4);
        pend(&model, S1, 7, 5, Mode::Read);
        model.event_record(0xe, S1, false, &Origin::test("cuEventRecord", 6));
        model.stream_wait_event(S2, 0xe, &Origin::test("cuStreamWaitEvent", 7));
        model.free(BUFFER, FreeOn::Stream(S2), &Origin::test("cuMemFreeAsync", 8));
        model.alloc(buffer(), Some(S2), &Origin::test("cuMemAllocAsync", 9));
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(BUFFER, 8, Mode::Read)], covers: &[] }));
        let races: Vec<(RaceKind, &str)> = model.races().iter().map(|r| (r.race.kind, r.race.first.op.api)).collect();
        assert_eq!(races, [(RaceKind::CrossStream, "cuMemsetD8Async")]);
    }

    /// A measured launch that touched a buffer freed before it was issued: a use after free,
    /// though a free issued after it is in its log (each synchronous free is an operation of
    /// the host's own, told from the others by its epoch).
    #[test]
    fn a_late_footprint_in_a_buffer_freed_before_its_launch_is_a_use_after_free() {
        const FREED: u64 = 0x20_0000;
        let model = Model::default();
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        let freed = Alloc { base: FREED, size: 256, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(freed, None, &Origin::test("cuMemAlloc", 2));
        model.free(FREED, FreeOn::Synchronous { ctx: 1 }, &Origin::test("cuMemFree", 3));
        model.alloc(buffer(), None, &Origin::test("cuMemAlloc", 4));
        pend(&model, S1, 7, 5, Mode::Read);
        model.free(BUFFER, FreeOn::Synchronous { ctx: 1 }, &Origin::test("cuMemFree", 6));
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(FREED, 8, Mode::Read)], covers: &[] }));
        let kinds: Vec<RaceKind> = model.races().iter().map(|r| r.race.kind).collect();
        assert_eq!(kinds, vec![RaceKind::UseAfterFree]);
    }

    /// A measured launch whose buffer another stream freed while it was pending: one
    /// free-race (the log's), not also a use-after-free of the freed buffer's history.
    #[test]
    fn a_free_issued_after_a_pending_launch_is_a_free_race_only() {
        let model = a_pending_launch(Mode::Read);
        model.free(BUFFER, FreeOn::Stream(S2), &Origin::test("cuMemFreeAsync", 4));
        model.launch_measured(7, Some(Footprint { ranges: &[Access::new(BUFFER, 64, Mode::Read)], covers: &[] }));
        let kinds: Vec<RaceKind> = model.races().iter().map(|r| r.race.kind).collect();
        assert_eq!(kinds, vec![RaceKind::FreeRace]);
    }

    /// A kernel writes the buffer's first 8 bytes on the first stream; then a programmatic
    /// launch there of a kernel that waits on its grid dependencies is pending as ticket 8.
    fn a_programmatic_dependent() -> Model {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        model.alloc(buffer(), None, &Origin::test("cuMemAlloc", 2));
        let write = [Access::new(BUFFER, 8, Mode::Write)];
        let origin = Origin::test("cuLaunchKernel", 3);
        model.work(S1, Work { origin, kernel: Some(KernelId(1)), accesses: &write, host: HostEffect::None });
        model.programmatic_next_launch(S1, GridWait::Unseen);
        pend(&model, S1, 8, 4, Mode::Read);
        model
    }

    fn kinds(model: &Model) -> (Vec<RaceKind>, usize) {
        let races = model.races().iter().map(|r| r.race.kind).collect();
        (races, model.notes().iter().filter(|n| n.kind == NoteKind::ProgrammaticLaunch).count())
    }

    /// Measured, a programmatic launch whose kernel waits races with the kernel ahead of it
    /// through what it read before its wait only; measured where the wait's place was not
    /// known (or not measured at all), it is ordered, and noted.
    #[test]
    fn a_pending_programmatic_launch_overlaps_the_kernel_ahead_with_its_accesses_before_its_wait() {
        for (place, expected) in [
            (WaitPlace::Before, (vec![RaceKind::CrossStream], 0)),
            (WaitPlace::After, (vec![], 0)),
            (WaitPlace::Unknown, (vec![], 1)),
        ] {
            let model = a_programmatic_dependent();
            let read = [Access { place, ..Access::new(BUFFER, 8, Mode::Read) }];
            model.launch_measured(8, Some(Footprint { ranges: &read, covers: &[] }));
            assert_eq!(kinds(&model), expected, "{place:?}");
        }
        let model = a_programmatic_dependent();
        model.launch_measured(8, None);
        assert_eq!(kinds(&model), (vec![], 1), "its parameters' guess");
    }

    /// A measured launch's ranges in one buffer beyond the cap are joined on each side of
    /// the wait apart: a range over both sides would hide what was read before the wait.
    #[test]
    fn ranges_before_and_after_the_wait_are_joined_apart() {
        let model = a_programmatic_dependent();
        let n = MAX_RANGES_PER_BUFFER as u64 + 1;
        let at = |k: u64, place| Access { place, ..Access::new(BUFFER + 16 * k, 8, Mode::Read) };
        let ranges: Vec<Access> = (0..n)
            .flat_map(|k| [at(k, WaitPlace::Before), Access { addr: BUFFER + 16 * k + 8, ..at(k, WaitPlace::After) }])
            .collect();
        model.launch_measured(8, Some(Footprint { ranges: &ranges, covers: &[] }));
        assert_eq!(kinds(&model), (vec![RaceKind::CrossStream], 0));
    }

    /// A measurement replaces the guess: a pointer into a buffer the kernel never touched is
    /// no access of it, unless it lies in a tensor map, which bulk copies follow unmeasured.
    #[test]
    fn a_measured_launch_keeps_only_the_guesses_the_measure_is_blind_to() {
        const OTHER: u64 = BUFFER + 0x1000;
        for blind in [false, true] {
            let model = a_pending_launch(Mode::Write);
            model.alloc(Alloc { base: OTHER, ..buffer() }, None, &Origin::test("cuMemAlloc", 4));
            let params = [
                Access::new(BUFFER, 8, Mode::Write),
                Access { blind, exact: false, ..Access::new(OTHER, 1, Mode::Unknown) },
            ];
            let work = Work {
                origin: Origin::test("cuLaunchKernel", 5),
                kernel: Some(KernelId(1)),
                accesses: &params,
                host: HostEffect::None,
            };
            assert!(model.launch_pending(S1, work, 8, None).is_some());
            let write = [Access::new(OTHER, 8, Mode::Write)];
            let origin = Origin::test("cuMemsetD8Async", 6);
            model.work(S2, Work { origin, kernel: None, accesses: &write, host: HostEffect::None });
            let measured = [Access::new(BUFFER, 8, Mode::Write)];
            for ticket in [7, 8] {
                model.launch_measured(ticket, Some(Footprint { ranges: &measured, covers: &[] }));
            }
            assert_eq!(model.races().len(), usize::from(blind), "blind {blind}: {:?}", model.races());
        }
    }
}
