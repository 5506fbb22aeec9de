//! The access history of one buffer: which operations last wrote and read which bytes. As in
//! FastTrack, with byte ranges, and a write supersedes only what it is ordered after, so that
//! an access it races with stays and later races with it are found too.

use super::clock::{Epoch, Slot, VectorClock};
use super::op::{Mode, OpRecord};
use super::residue;

/// Records kept per buffer before some are forgotten (possibly missing a race, never
/// inventing one): the oldest of the slot that holds the most.
pub const MAX_RECORDS: usize = 32;

/// One access in the history: bytes `[lo, hi)`, of them those of `residues`
/// ([`residue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub lo: u64,
    pub hi: u64,
    pub residues: u64,
    pub mode: Mode,
    pub op: OpRecord,
}

impl Record {
    pub fn overlaps(&self, lo: u64, hi: u64) -> bool {
        self.lo < hi && lo < self.hi
    }

    /// Whether it may share a byte with `[lo, hi)` of `residues`.
    fn shares(&self, lo: u64, hi: u64, residues: u64) -> bool {
        self.overlaps(lo, hi) && residue::meet(self.residues, residues, self.lo.max(lo), self.hi.min(hi))
    }
}

#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct Shadow {
    records: Vec<Record>,
    /// The slot of every record, when they share one: a buffer used by one stream (the
    /// common case) then needs no check, everything before being ordered before.
    sole: Option<Slot>,
    /// The hull of the bytes of forgotten records: touched, though no record says so.
    forgotten: Option<(u64, u64)>,
}

impl Shadow {
    /// Every record that conflicts with an access of `[lo, hi)` (`residues` of it) in `mode`
    /// by the operation `epoch`, whose clock is `clock`: sharing bytes, conflicting modes, and
    /// not ordered before it.
    pub fn conflicts<'a>(
        &'a self,
        lo: u64,
        hi: u64,
        residues: u64,
        mode: Mode,
        epoch: Epoch,
        clock: &'a VectorClock,
    ) -> impl Iterator<Item = &'a Record> + 'a {
        // Earlier operations of the same slot are ordered before this one, unless its clock
        // leaves some out (a programmatic launch overlapping the kernel before it).
        let ordered = self.sole == Some(epoch.slot) && clock.get(epoch.slot) >= epoch.time;
        let records = if ordered { &[][..] } else { &self.records[..] };
        records.iter().filter(move |r| {
            r.shares(lo, hi, residues) && r.mode.conflicts_with(mode) && !r.op.epoch.happens_before(clock)
        })
    }

    /// Whether `[lo, hi)` was never accessed (as far as the history knows, erring towards
    /// touched).
    pub fn untouched(&self, lo: u64, hi: u64) -> bool {
        let forgotten = self.forgotten.is_some_and(|(flo, fhi)| flo < hi && lo < fhi);
        !forgotten && !self.records.iter().any(|r| r.overlaps(lo, hi))
    }

    /// Every record not ordered before `clock` (what a free must wait for).
    pub fn unordered<'a>(&'a self, clock: &'a VectorClock) -> impl Iterator<Item = &'a Record> + 'a {
        self.records.iter().filter(move |r| !r.op.epoch.happens_before(clock))
    }

    /// Adds an access by an operation whose clock is `clock`, dropping what it supersedes.
    pub fn record(&mut self, lo: u64, hi: u64, residues: u64, mode: Mode, op: OpRecord, clock: &VectorClock) {
        if matches!(mode, Mode::Write | Mode::ReadWrite) {
            // A write supersedes every earlier access to its bytes that it is ordered after:
            // keep only the parts of those records outside [lo, hi). An access it races with
            // stays whole, so that later operations unordered with it are still checked
            // against it (a free-race after a first race, say): the history loses no race
            // that it once held.
            // In place: this runs on every write. A record straddling the write leaves a tail
            // (rare: it allocates only then).
            // (The same slot's earlier operations are ordered before it without a look at
            // the clock, unless the clock leaves some out. A measured launch recorded late may
            // find later ones of its slot.)
            let (slot, time) = (op.epoch.slot, op.epoch.time);
            let in_order = clock.get(slot) >= time;
            let mut tails = Vec::new();
            self.records.retain_mut(|r| {
                if !r.overlaps(lo, hi) {
                    return true;
                }
                let e = r.op.epoch;
                if !((in_order && e.slot == slot && e.time <= time) || ordered_by(e, clock)) {
                    return true;
                }
                // A strided write supersedes only records whose bytes it surely covers.
                let overlap = residue::of(r.lo.max(lo), r.hi.min(hi));
                if !residue::within(r.residues & overlap, residues) {
                    return true;
                }
                match (r.lo < lo, hi < r.hi) {
                    (false, false) => return false,
                    (true, true) => tails.push(Record { lo: hi, ..*r }),
                    (false, true) => r.lo = hi,
                    (true, false) => {}
                }
                if r.lo < lo {
                    r.hi = lo;
                }
                true
            });
            self.records.append(&mut tails);
        } else {
            // A read (an unknown access) supersedes reads (unknown accesses) of the same or fewer
            // bytes that are ordered before it: whatever races with them races with it. Neither
            // supersedes the other kind, which conflicts with different accesses.
            self.records.retain(|r| {
                !(r.mode == mode
                    && lo <= r.lo
                    && r.hi <= hi
                    && residue::within(r.residues, residues)
                    && r.op.epoch.happens_before(clock))
            });
        }
        let slot = op.epoch.slot;
        self.sole = match self.sole {
            _ if self.records.is_empty() => Some(slot),
            Some(sole) if sole == slot => Some(slot),
            // A write may have left only this slot's records.
            _ if self.records.iter().all(|r| r.op.epoch.slot == slot) => Some(slot),
            _ => None,
        };
        self.records.push(Record { lo, hi, residues, mode, op });
        // A write that split records left a tail for each: as many may go as came.
        self.forget_beyond_bound();
    }

    /// Forgets records beyond [`MAX_RECORDS`], keeping the bytes they covered: each time
    /// the oldest of the slot (stream) that holds the most records. A caching allocator puts
    /// hundreds of tensors in one driver allocation, and the stream doing most of the work
    /// fills its history: what another stream did there must outlive that traffic, since
    /// only accesses of other streams can race with it.
    fn forget_beyond_bound(&mut self) {
        while self.records.len() > MAX_RECORDS {
            let at = match self.sole {
                Some(_) => 0,
                None => {
                    let slot = self.busiest_slot();
                    self.records.iter().position(|r| r.op.epoch.slot == slot).unwrap_or(0)
                }
            };
            let oldest = self.records.remove(at);
            let (flo, fhi) = self.forgotten.unwrap_or((oldest.lo, oldest.hi));
            self.forgotten = Some((flo.min(oldest.lo), fhi.max(oldest.hi)));
        }
    }

    /// The slot with the most records (the first such, oldest first).
    fn busiest_slot(&self) -> Slot {
        // A handful of slots at most: counted in place, without allocating.
        let mut counts = [(0 as Slot, 0u32); 8];
        let mut distinct = 0;
        for r in &self.records {
            match counts[..distinct].iter().position(|&(s, _)| s == r.op.epoch.slot) {
                Some(i) => counts[i].1 += 1,
                None if distinct < counts.len() => {
                    counts[distinct] = (r.op.epoch.slot, 1);
                    distinct += 1;
                }
                // More slots than counted: the ones counted hold the most, or close.
                None => {}
            }
        }
        // `max_by_key` returns the last of equals: counted backwards, that is the first.
        counts[..distinct].iter().rev().max_by_key(|&&(_, n)| n).map_or(0, |&(s, _)| s)
    }

    /// How many records an access by the operation `epoch` is compared with for conflicts.
    pub fn compared(&self, epoch: Epoch) -> usize {
        if self.sole == Some(epoch.slot) {
            0
        } else {
            self.records.len()
        }
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn clear(&mut self) {
        self.records.clear();
        self.forgotten = None;
        self.sole = None;
    }
}

/// Whether `epoch` happens before `clock`: kept out of line, so that the loops over records
/// that call it only for another slot's records stay small.
#[inline(never)]
fn ordered_by(epoch: Epoch, clock: &VectorClock) -> bool {
    epoch.happens_before(clock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::{StackId, ThreadId};
    use crate::model::residue::DENSE;

    fn op(slot: u32, time: u32) -> OpRecord {
        OpRecord { api: "test", kernel: None, epoch: Epoch::new(slot, time), thread: ThreadId(1), site: StackId(0) }
    }

    fn clock(entries: &[(u32, u32)]) -> VectorClock {
        let mut c = VectorClock::new();
        for &(s, t) in entries {
            c.set(s, t);
        }
        c
    }

    #[test]
    fn unordered_write_then_read_conflicts() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        let reader = clock(&[(2, 1)]);
        let on_2 = Epoch::new(2, 1);
        assert_eq!(s.conflicts(4, 5, DENSE, Mode::Read, on_2, &reader).count(), 1);
        assert_eq!(s.conflicts(8, 9, DENSE, Mode::Read, on_2, &reader).count(), 0, "disjoint bytes");
        let ordered = clock(&[(1, 1), (2, 1)]);
        assert_eq!(s.conflicts(4, 5, DENSE, Mode::Read, on_2, &ordered).count(), 0);
    }

    #[test]
    fn concurrent_reads_do_not_conflict_but_are_kept() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Read, op(1, 1), &clock(&[(1, 1)]));
        s.record(0, 8, DENSE, Mode::Read, op(2, 1), &clock(&[(2, 1)]));
        assert_eq!(s.records().len(), 2);
        // A write ordered after only one of the reads conflicts with the other.
        let writer = clock(&[(1, 1), (3, 1)]);
        let conflicts: Vec<_> = s.conflicts(0, 8, DENSE, Mode::Write, Epoch::new(3, 1), &writer).collect();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].op.epoch.slot, 2);
    }

    #[test]
    fn unknown_accesses_conflict_with_reads_and_writes_but_not_each_other() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Unknown, op(1, 1), &clock(&[(1, 1)]));
        let (other, on_2) = (clock(&[(2, 1)]), Epoch::new(2, 1));
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Unknown, on_2, &other).count(), 0);
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Read, on_2, &other).count(), 1);
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Write, on_2, &other).count(), 1);
        assert!(!s.untouched(0, 1) && s.untouched(8, 9));
    }

    #[test]
    fn records_of_one_stream_are_not_searched_by_that_stream() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        s.record(0, 8, DENSE, Mode::Read, op(1, 2), &clock(&[(1, 2)]));
        // Stream 1's next access sees nothing to check, another stream's sees the write.
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Write, Epoch::new(1, 3), &clock(&[(1, 3)])).count(), 0);
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Read, Epoch::new(2, 1), &clock(&[(2, 1)])).count(), 1);
        // Once another stream's record is there, every check is made.
        s.record(0, 8, DENSE, Mode::Read, op(2, 1), &clock(&[(2, 1)]));
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Write, Epoch::new(1, 3), &clock(&[(1, 3)])).count(), 1);
        // A write of stream 1 ordered after it leaves stream 1 alone again.
        s.record(0, 8, DENSE, Mode::Write, op(1, 3), &clock(&[(1, 3), (2, 1)]));
        assert_eq!(s.conflicts(0, 8, DENSE, Mode::Write, Epoch::new(1, 4), &clock(&[(1, 4)])).count(), 0);
    }

    #[test]
    fn an_ordered_read_supersedes_older_reads() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Read, op(1, 1), &clock(&[(1, 1)]));
        s.record(0, 8, DENSE, Mode::Read, op(1, 2), &clock(&[(1, 2)]));
        assert_eq!(s.records().len(), 1);
    }

    #[test]
    fn a_write_trims_what_it_overwrites() {
        let mut s = Shadow::default();
        s.record(0, 100, DENSE, Mode::Read, op(1, 1), &clock(&[(1, 1)]));
        s.record(40, 60, DENSE, Mode::Write, op(1, 2), &clock(&[(1, 2)]));
        let ranges: Vec<_> = s.records().iter().map(|r| (r.lo, r.hi, r.mode)).collect();
        assert_eq!(ranges, vec![(0, 40, Mode::Read), (60, 100, Mode::Read), (40, 60, Mode::Write)]);
    }

    #[test]
    fn a_write_to_the_end_of_a_record_leaves_its_head_and_no_empty_tail() {
        let mut s = Shadow::default();
        s.record(0, 100, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        s.record(40, 100, DENSE, Mode::Write, op(1, 2), &clock(&[(1, 2)]));
        let ranges: Vec<_> = s.records().iter().map(|r| (r.lo, r.hi, r.op.epoch.time)).collect();
        assert_eq!(ranges, vec![(0, 40, 1), (40, 100, 2)]);
        // Nothing of the first write is left past byte 40: another stream's access there
        // races with the second write only.
        let reader = clock(&[(2, 1)]);
        let times: Vec<u32> =
            s.conflicts(40, 101, DENSE, Mode::Read, Epoch::new(2, 1), &reader).map(|r| r.op.epoch.time).collect();
        assert_eq!(times, vec![2]);
    }

    #[test]
    fn a_write_keeps_the_access_it_races_with() {
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        // Stream 2 overwrites the bytes without waiting for stream 1: a race, reported then.
        s.record(0, 8, DENSE, Mode::Write, op(2, 1), &clock(&[(2, 1)]));
        // A third stream ordered after stream 2 only still races with stream 1's write.
        let third = clock(&[(2, 1), (3, 1)]);
        let conflicts: Vec<_> =
            s.conflicts(0, 8, DENSE, Mode::Read, Epoch::new(3, 1), &third).map(|r| r.op.epoch).collect();
        assert_eq!(conflicts, vec![Epoch::new(1, 1)]);
    }

    #[test]
    fn a_write_recorded_late_keeps_its_streams_later_records() {
        // A measured launch (time 1 of slot 1) recorded after a later write of its own
        // stream (time 2): it is not ordered after that write, which stays.
        let mut s = Shadow::default();
        s.record(0, 8, DENSE, Mode::Write, op(1, 2), &clock(&[(1, 2)]));
        s.record(0, 8, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        let times: Vec<u32> = s.records().iter().map(|r| r.op.epoch.time).collect();
        assert_eq!(times, vec![2, 1]);
    }

    #[test]
    fn history_is_bounded() {
        let mut s = Shadow::default();
        for i in 0..(MAX_RECORDS as u64 + 10) {
            s.record(i, i + 1, DENSE, Mode::Read, op(i as u32 + 1, 1), &clock(&[(i as u32 + 1, 1)]));
        }
        assert_eq!(s.records().len(), MAX_RECORDS);
        assert!(!s.untouched(0, 1), "a forgotten access still touched its bytes");
        assert!(s.untouched(MAX_RECORDS as u64 + 10, MAX_RECORDS as u64 + 11));
    }

    #[test]
    fn the_bytes_beside_forgotten_records_are_untouched() {
        // One stream's reads of every other byte from 100: the ten oldest are forgotten,
        // [100, 119) their hull.
        let mut s = Shadow::default();
        for i in 0..(MAX_RECORDS as u64 + 10) {
            let t = i as u32 + 1;
            s.record(100 + 2 * i, 101 + 2 * i, DENSE, Mode::Read, op(1, t), &clock(&[(1, t)]));
        }
        assert_eq!(s.records()[0].lo, 120);
        assert!(!s.untouched(100, 101) && !s.untouched(117, 118) && !s.untouched(118, 119), "forgotten");
        assert!(s.untouched(99, 100), "just below what was forgotten");
        assert!(s.untouched(119, 120), "just above it");
    }

    #[test]
    fn the_busiest_stream_s_oldest_record_is_forgotten_first() {
        // Stream 2 reads byte 0, stream 1 bytes from 1 on, stream 3 byte 1000 among them.
        let mut s = Shadow::default();
        s.record(0, 1, DENSE, Mode::Read, op(2, 1), &clock(&[(2, 1)]));
        for i in 1..(MAX_RECORDS as u64 + 10) {
            let t = i as u32;
            s.record(i, i + 1, DENSE, Mode::Read, op(1, t), &clock(&[(1, t)]));
            if i == 5 {
                s.record(1000, 1001, DENSE, Mode::Read, op(3, 1), &clock(&[(3, 1)]));
            }
        }
        let slots: Vec<_> = s.records().iter().map(|r| r.op.epoch.slot).collect();
        assert_eq!((slots[0], slots.iter().filter(|&&slot| slot == 3).count()), (2, 1), "{slots:?}");
        let first_of_1 = s.records().iter().find(|r| r.op.epoch.slot == 1).map(|r| r.lo);
        assert_eq!(first_of_1, Some(12), "[1, 12) forgotten");
    }

    #[test]
    fn among_streams_holding_as_many_records_the_oldest_record_is_forgotten() {
        // Reads of [100, 142) by as many streams, a byte each: the ten oldest are forgotten.
        let mut s = Shadow::default();
        for i in 0..(MAX_RECORDS as u64 + 10) {
            s.record(100 + i, 101 + i, DENSE, Mode::Read, op(i as u32 + 1, 1), &clock(&[(i as u32 + 1, 1)]));
        }
        let kept: Vec<_> = s.records().iter().map(|r| r.lo).take(2).collect();
        assert_eq!(kept, vec![110, 111], "[100, 110) forgotten");
    }

    #[test]
    fn writes_that_split_records_keep_the_history_bounded() {
        // A memset of the whole buffer, then 64-byte writes into every other chunk: each
        // splits what the memset left into a head and a tail.
        let mut s = Shadow::default();
        s.record(0, 128 * 1000, DENSE, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        for i in 0..1000u64 {
            let t = i as u32 + 2;
            s.record(128 * i + 32, 128 * i + 96, DENSE, Mode::Write, op(1, t), &clock(&[(1, t)]));
            assert!(s.records().len() <= MAX_RECORDS, "{} records after {} writes", s.records().len(), i + 1);
        }
        assert!(!s.untouched(0, 1), "what was forgotten still counts as touched");
    }

    #[test]
    fn strided_accesses_keep_their_gaps() {
        const EVEN: u64 = 0x5555_5555_5555_5555;
        let (other, on_2) = (clock(&[(2, 1)]), Epoch::new(2, 1));
        // Floats x[0::2] written: x[1::2] on another stream is no race, x[0::4] is.
        let mut s = Shadow::default();
        s.record(0, 1020, EVEN, Mode::Write, op(1, 1), &clock(&[(1, 1)]));
        assert_eq!(s.conflicts(4, 1024, !EVEN, Mode::Write, on_2, &other).count(), 0);
        assert_eq!(s.conflicts(0, 1012, 0x1111_1111_1111_1111, Mode::Write, on_2, &other).count(), 1);
        // A strided write after a dense read leaves the read its other bytes.
        let mut s = Shadow::default();
        s.record(0, 1024, DENSE, Mode::Read, op(1, 1), &clock(&[(1, 1)]));
        s.record(0, 1020, EVEN, Mode::Write, op(1, 2), &clock(&[(1, 2)]));
        assert_eq!(s.records().len(), 2);
        assert_eq!(s.conflicts(4, 1024, !EVEN, Mode::Write, on_2, &other).count(), 1);
    }
}
