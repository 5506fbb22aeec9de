//! The rule of `footprint=learn` ([`crate::model::footprint::learnt`] holds what is learnt and how): a measured
//! launch's ranges attributed to its pointers through the buffers they fall in, a learnt
//! cover noted, and the learnt extents given to a later launch.

use crate::model::buffers::Found;
use crate::model::footprint::learnt::{self, Learning, LearntSummary, Lookup};
use crate::model::footprint::measured::Footprint;
use crate::model::footprint::pending::Pending;
use crate::model::op::Access;
use crate::model::race::NoteKind;
use crate::model::Model;
use crate::phases::{self, Tally};

impl Model {
    /// Replaces a launch's parameter accesses (`accesses`, each with its slot) by what was
    /// learnt for its kernel and words, if anything was, given through them and its
    /// `anchors`: a pointer it was not seen to follow is no access, unless the measure is
    /// blind to it ([`Access::blind`]).
    pub fn apply_learnt(&self, kernel: u64, words: &[u64], accesses: &mut Vec<Access>, anchors: &[Access]) -> Lookup {
        self.learnt.apply(kernel, words, accesses, anchors)
    }

    /// Learns from a measured launch (`pending`): its ranges are attributed to its pointers
    /// through the buffers they fall in as the launch met them (a pool may have handed an
    /// address out again before the footprint was read). When one of its addresses now holds
    /// a buffer allocated after it that none of its pointers met, nothing is learnt, and a
    /// later launch is measured instead.
    pub(in crate::model) fn learn(&self, learning: &Learning, pending: &Pending, measured: Footprint<'_>) {
        let guess = &pending.guess;
        let reused = |addr: u64| {
            pending.met_at(addr).is_none()
                && matches!(self.buffers.find(addr), Found::Live(b) | Found::Freed(b) if b.id >= pending.next_buffer)
        };
        let pointers = guess.iter().chain(learning.anchors.iter()).filter(|g| g.slot.is_some()).map(|g| g.addr);
        if pointers.chain(measured.ranges.iter().map(|r| r.addr)).any(reused) {
            return;
        }
        let known = learnt::known(guess, &learning.anchors, measured, |addr| {
            phases::tally(Tally::LearnBufferLookups, 1);
            if let Some(b) = pending.met_at(addr) {
                return Some((b.base, b.end()));
            }
            match self.buffers.find(addr) {
                Found::Live(b) | Found::Freed(b) => Some((b.base, b.end())),
                Found::Nothing => None,
            }
        });
        if known.has_cover() {
            self.notes.add(NoteKind::FootprintLearntCover, pending.op, learning.kernel);
        }
        self.learnt.learn(learning.kernel, learning.words.clone(), known);
    }

    /// What was learnt so far (for the engine's trace at exit).
    pub fn learnt_summary(&self) -> LearntSummary {
        self.learnt.summary()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::buffers::{Buffer, MemoryKind};
    use crate::model::clock::VectorClock;
    use crate::model::footprint::learnt::{IGNORED_AFTER, POINTER, RECENT};
    use crate::model::op::{Mode, OpRecord, Overlap, WaitPlace};
    use crate::model::op::{Origin, StackId, ThreadId};
    use crate::model::Alloc;

    const BASE: u64 = 0x10_0000;
    const SIZE: u64 = 0x1_0000;

    fn model() -> Model {
        let m = Model::default();
        alloc(&m, BASE, SIZE);
        m
    }

    fn alloc(m: &Model, base: u64, size: u64) {
        let origin = Origin { api: "cuMemAlloc_v2", thread: ThreadId(1), site: StackId(0) };
        m.alloc(Alloc { base, size, kind: MemoryKind::Device, ctx: 1 }, None, &origin);
    }

    /// A measured write of the buffer's first `n` bytes.
    fn write(n: u64) -> [Access; 1] {
        [Access::new(BASE, n, Mode::Write)]
    }

    fn op() -> OpRecord {
        OpRecord {
            api: "cuLaunchKernel",
            kernel: None,
            epoch: Default::default(),
            thread: ThreadId(1),
            site: StackId(0),
        }
    }

    /// A whole pointer parameter at `slot`, as the parameter scan gives it.
    fn pointer(addr: u64, slot: u32) -> Access {
        Access { slot: Some(slot), ..Access::new(addr, 1, Mode::Unknown) }
    }

    fn learning(kernel: u64, words: &[u64]) -> Learning {
        Learning { kernel, words: words.into(), anchors: Arc::from([]) }
    }

    /// A measured launch of `guess`, issued before the buffer numbered `next_buffer` was
    /// allocated, whose pointers were in `met`.
    fn pending(guess: &[Access], next_buffer: u64, met: Vec<Arc<Buffer>>) -> Pending {
        let clock = VectorClock::default();
        Pending {
            ticket: 1,
            seq: 1,
            op: op(),
            clock,
            overlap: Overlap::None,
            next_buffer,
            met,
            issued_at: 0,
            guess: guess.to_vec(),
            learn: None,
        }
    }

    /// Learns from a launch read while every buffer it met still holds its addresses.
    fn learn(m: &Model, learning: &Learning, guess: &[Access], measured: Footprint<'_>) {
        m.learn(learning, &pending(guess, u64::MAX, Vec::new()), measured);
    }

    fn exact(ranges: &[Access]) -> Footprint<'_> {
        Footprint { ranges, covers: &[] }
    }

    fn span(a: &Access) -> (u64, u64, Mode) {
        (a.addr, a.len, a.mode)
    }

    #[test]
    fn extents_are_learnt_relative_to_each_pointer_and_applied_to_new_pointers() {
        let m = model();
        // Slot 0 points at the buffer, slot 8 at its middle; the launch wrote the first half
        // and read the second.
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE / 2, 8)];
        let measured = [Access::new(BASE, SIZE / 2, Mode::Write), Access::new(BASE + SIZE / 2, SIZE / 2, Mode::Read)];
        let words = [7, POINTER, POINTER];
        learn(&m, &learning(1, &words), &guess, exact(&measured));
        // Exact ranges, no cover: nothing to note.
        assert!(m.notes.entries().is_empty(), "{:?}", m.notes.entries());
        // A later launch with the same words, its pointers 256 bytes further on.
        let mut later = vec![pointer(BASE + 256, 0), pointer(BASE + 256 + SIZE / 4, 8)];
        assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 256, SIZE / 2, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + 256 + SIZE / 4, SIZE / 2, Mode::Read));
        assert_eq!(m.apply_learnt(1, &[8, POINTER, POINTER], &mut later, &[]), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.apply_learnt(2, &words, &mut later, &[]), Lookup::Unknown { kernel_seen: false });
        let summary = LearntSummary { kernels: 1, keys: 1, covers: 0, unlearnable: 0, ignored_words: 0, applied: 1 };
        assert_eq!(m.learnt_summary(), summary);
    }

    #[test]
    fn a_buffer_reached_through_an_anchor_is_learnt_through_it() {
        // A tensor list's second entry once held a stale host address: the scan reads it as
        // data, so its pointer is an anchor, no access. The write through it is learnt
        // relative to it, not to the first entry's pointer into the same buffer, and a later
        // launch whose entry points elsewhere is given the write there.
        let m = model();
        let guess = [pointer(BASE, 0)];
        let anchored = Learning {
            kernel: 1,
            words: Arc::from([POINTER, POINTER, 64]),
            anchors: Arc::from([pointer(BASE + 4096, 8)]),
        };
        let measured = [Access::new(BASE, 64, Mode::Read), Access::new(BASE + 4096, 64, Mode::Write)];
        learn(&m, &anchored, &guess, exact(&measured));
        let mut later = vec![pointer(BASE + 256, 0)];
        let anchors = [pointer(BASE + 8192, 8)];
        assert_eq!(m.apply_learnt(1, &anchored.words, &mut later, &anchors), Lookup::Applied);
        let spans: Vec<_> = later.iter().map(span).collect();
        assert_eq!(spans, [(BASE + 256, 64, Mode::Read), (BASE + 8192, 64, Mode::Write)]);
    }

    #[test]
    fn a_stale_field_repeating_a_parameters_pointer_takes_none_of_its_range() {
        // A concatenation's unused entries (after its output parameter) hold stale pointers,
        // some launches its output's own: the output's range stays the lower slot's, so the
        // footprint does not move as the stale entry comes and goes, and a stale word that
        // differs between the launches leaves the key.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let measured = [Access::new(BASE, SIZE, Mode::Write)];
        for (stale, field) in [(1, BASE), (2, BASE + SIZE), (3, BASE), (4, BASE + SIZE)] {
            let guess = [pointer(BASE, 0), pointer(field, 2456)];
            learn(&m, &learning(1, &[POINTER, POINTER, stale]), &guess, exact(&measured));
        }
        let mut later = vec![pointer(BASE + SIZE, 0), pointer(BASE + SIZE, 2456)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(later.iter().map(span).collect::<Vec<_>>(), [(BASE + SIZE, SIZE, Mode::Write)]);
    }

    #[test]
    fn a_stale_anchor_inside_a_parameters_range_takes_none_of_it() {
        // A concatenation's unused entries hold stale pointers into its output, at another
        // place each launch: the output's one range stays its parameter's, so the footprint
        // does not move with them and a launch with the stale pointer elsewhere is predicted.
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE, SIZE, Mode::Write)];
        for (stale, at) in [(1, 4096), (2, 8192), (3, 512)] {
            let learning = Learning {
                kernel: 1,
                words: Arc::from([POINTER, POINTER, stale]),
                anchors: Arc::from([pointer(BASE + at, 8)]),
            };
            learn(&m, &learning, &guess, exact(&measured));
        }
        let mut later = vec![pointer(BASE, 0)];
        let anchors = [pointer(BASE + 64, 8)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 99], &mut later, &anchors), Lookup::Applied);
        assert_eq!(later.iter().map(span).collect::<Vec<_>>(), [(BASE, SIZE, Mode::Write)]);
    }

    #[test]
    fn a_stale_field_that_points_into_the_buffer_at_some_launches_keys_by_being_a_pointer() {
        // A multi-tensor kernel's chunk: its pointer at the buffer's start, the range it
        // writes 8 KiB on. A stale field (slot 8) holds host data, two values in turn, and at
        // a later launch an address in the buffer below the range, which then takes the
        // range; a stale count beside it is new at every launch. Whether the field holds a
        // pointer goes back into the key, not its value: launches of either shape with values
        // never seen are predicted.
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE + 8192, 8192, Mode::Write)];
        let data = |stale: u64, count: u64| learning(1, &[POINTER, stale, count]);
        for (stale, count) in [(0x7ffe_0010, 1), (0x7ffe_0020, 2), (0x7ffe_0010, 3)] {
            learn(&m, &data(stale, count), &guess, exact(&measured));
        }
        assert_eq!(m.learnt_summary().ignored_words, 2);
        let anchored = |count: u64| Learning {
            kernel: 1,
            words: Arc::from([POINTER, POINTER, count]),
            anchors: Arc::from([pointer(BASE + 4096, 8)]),
        };
        learn(&m, &anchored(4), &guess, exact(&measured));
        let mut later = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 0x7ffe_0030, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(later.iter().map(span).collect::<Vec<_>>(), [(BASE + 8192, 8192, Mode::Write)]);
        let mut later = vec![pointer(BASE, 0)];
        let anchors = [pointer(BASE + 4096, 8)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 100], &mut later, &anchors), Lookup::Applied);
        assert_eq!(later.iter().map(span).collect::<Vec<_>>(), [(BASE + 8192, 8192, Mode::Write)]);
    }

    #[test]
    fn a_cover_reaches_an_anchors_buffer_only_where_a_range_was_measured_in_it() {
        // An optimizer's overflowed launch: its cover spans from the first buffer to the
        // third, and a stale field points into the second (a prefetcher's pinned staging
        // buffer), where nothing was measured. Nothing is learnt through that anchor; an
        // anchor into the third, where a range was measured, keeps its part of the cover.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        alloc(&m, BASE + 2 * SIZE, SIZE);
        let learning = Learning {
            kernel: 1,
            words: Arc::from([POINTER, POINTER, POINTER]),
            anchors: Arc::from([pointer(BASE + SIZE, 8), pointer(BASE + 2 * SIZE, 16)]),
        };
        let ranges = [Access::new(BASE + 2 * SIZE, 64, Mode::Write)];
        let cover = Access::new(BASE + 128, 2 * SIZE, Mode::ReadWrite);
        learn(&m, &learning, &[pointer(BASE, 0)], Footprint { ranges: &ranges, covers: &[cover] });
        let mut later = vec![pointer(BASE, 0)];
        let anchors = [pointer(BASE + SIZE + 512, 8), pointer(BASE + 2 * SIZE, 16)];
        assert_eq!(m.apply_learnt(1, &learning.words, &mut later, &anchors), Lookup::Applied);
        let in_second = |a: &Access| a.addr < BASE + 2 * SIZE && a.addr + a.len > BASE + SIZE;
        assert!(!later.iter().any(in_second), "{later:?}");
        assert!(later.iter().any(|a| a.addr == BASE + 2 * SIZE && a.mode == Mode::ReadWrite), "{later:?}");
    }

    #[test]
    fn a_cover_reaches_a_fields_buffer_only_where_a_range_was_measured_in_it() {
        // As above, the stale pointer a field of a by-value parameter: the scan gave it as a
        // guess, not an anchor. A whole pointer parameter's buffer takes its part of the cover.
        for (field, ranged) in [(false, false), (true, false), (true, true)] {
            let m = model();
            alloc(&m, BASE + SIZE, SIZE);
            let second = Access { exact: !field, ..pointer(BASE + SIZE, 8) };
            let learning = Learning { kernel: 1, words: Arc::from([POINTER, POINTER]), anchors: Arc::from([]) };
            let ranges: Vec<Access> =
                ranged.then(|| Access::new(BASE + SIZE + 64, 8, Mode::Read)).into_iter().collect();
            let cover = Access::new(BASE + 128, SIZE, Mode::ReadWrite);
            learn(&m, &learning, &[pointer(BASE, 0), second], Footprint { ranges: &ranges, covers: &[cover] });
            let mut later = vec![pointer(BASE, 0), Access { addr: BASE + SIZE, ..second }];
            assert_eq!(m.apply_learnt(1, &learning.words, &mut later, &[]), Lookup::Applied);
            let in_second = later
                .iter()
                .any(|a| a.addr < BASE + 2 * SIZE && a.addr + a.len > BASE + SIZE && a.mode == Mode::ReadWrite);
            assert_eq!(in_second, !field || ranged, "field {field}, ranged {ranged}: {later:?}");
        }
    }

    /// What a pointer's kernel touched before its first grid-dependency wait and after it
    /// are learnt apart, each keeping its place: a later launch is given both, so that a
    /// programmatic launch of it overlaps the kernel ahead with the first alone.
    #[test]
    fn extents_before_and_after_the_wait_are_learnt_apart() {
        let m = model();
        let placed = |lo: u64, len, place| Access { place, ..Access::new(BASE + lo, len, Mode::Read) };
        let measured = [placed(0, 64, WaitPlace::Before), placed(32, 96, WaitPlace::After)];
        let words = [POINTER];
        learn(&m, &learning(1, &words), &[pointer(BASE, 0)], exact(&measured));
        let mut later = vec![pointer(BASE + 256, 0)];
        assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), Lookup::Applied);
        let given: Vec<_> = later.iter().map(|a| (a.addr, a.len, a.place)).collect();
        assert_eq!(given, [(BASE + 256, 64, WaitPlace::Before), (BASE + 288, 96, WaitPlace::After)]);
        // A blind pointer beside it stays, after both of the first pointer's extents.
        let blind = Access { blind: true, ..pointer(BASE + 0x1000, 8) };
        let mut later = vec![pointer(BASE + 256, 0), blind];
        assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), Lookup::Applied);
        let given: Vec<_> = later.iter().map(|a| (a.addr, a.place)).collect();
        assert_eq!(
            given,
            [(BASE + 256, WaitPlace::Before), (BASE + 0x1000, WaitPlace::Unknown), (BASE + 288, WaitPlace::After)]
        );
    }

    /// A launch whose footprint is read after its buffer was freed and its address handed
    /// out again: learnt through the buffer its pointer met then, not the one there now;
    /// when no pointer met the address (a table of pointers), nothing is learnt.
    #[test]
    fn a_reused_address_is_learnt_through_the_buffer_the_launch_met() {
        let words = [POINTER];
        let measured = [Access::new(BASE, 64, Mode::Write)];
        for met_it in [true, false] {
            let m = model();
            let issued_before = m.next_buffer.load(std::sync::atomic::Ordering::Relaxed);
            let met = if met_it { m.met_buffers(&[pointer(BASE, 0)]) } else { Vec::new() };
            let origin = Origin { api: "cuMemFree_v2", thread: ThreadId(1), site: StackId(0) };
            m.free(BASE, crate::model::FreeOn::Synchronous { ctx: 1 }, &origin);
            alloc(&m, BASE, SIZE);
            m.learn(&learning(1, &words), &pending(&[pointer(BASE, 0)], issued_before, met), exact(&measured));
            let mut later = vec![pointer(BASE, 0)];
            let expected = if met_it { Lookup::Applied } else { Lookup::Unknown { kernel_seen: false } };
            assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), expected, "met: {met_it}");
        }
    }

    #[test]
    fn memory_no_pointer_leads_to_makes_a_launch_unlearnable() {
        let m = model();
        alloc(&m, 0x40_0000, SIZE);
        let words = [POINTER];
        learn(&m, &learning(1, &words), &[pointer(BASE, 0)], exact(&[Access::new(0x40_0000, 64, Mode::Read)]));
        assert_eq!(m.apply_learnt(1, &words, &mut vec![pointer(BASE, 0)], &[]), Lookup::Unlearnable);
        let summary = LearntSummary { kernels: 1, keys: 1, covers: 0, unlearnable: 1, ignored_words: 0, applied: 0 };
        assert_eq!(m.learnt_summary(), summary);
    }

    #[test]
    fn a_range_over_two_adjacent_buffers_is_split_between_their_pointers() {
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        let words = [POINTER, POINTER];
        learn(&m, &learning(1, &words), &guess, exact(&[Access::new(BASE + 16, SIZE, Mode::Write)]));
        let mut later = guess.to_vec();
        assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 16, SIZE - 16, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + SIZE, 16, Mode::Write));
    }

    #[test]
    fn a_range_over_two_adjacent_tensors_of_one_buffer_is_split_at_the_second_pointer() {
        // Two inputs read and one output written, all in one allocator block; the inputs lie
        // side by side in one launch (one measured range over both) and apart in the next,
        // with a stale word that differs: the same footprint, so the word leaves the key.
        let m = model();
        let (n, out) = (0x1000, BASE + SIZE / 2);
        for (step, second) in [(0, BASE + n), (1, BASE + 4 * n), (2, BASE + n)] {
            let guess = [pointer(BASE, 0), pointer(second, 8), pointer(out, 16)];
            let mut measured = vec![Access::new(BASE, n, Mode::Read), Access::new(out, n, Mode::Write)];
            if second == BASE + n {
                measured[0].len = 2 * n;
            } else {
                measured.push(Access::new(second, n, Mode::Read));
            }
            learn(&m, &learning(1, &[POINTER, POINTER, POINTER, step]), &guess, exact(&measured));
        }
        let mut later = vec![pointer(BASE + 8 * n, 0), pointer(BASE + 9 * n, 8), pointer(out, 16)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, POINTER, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 8 * n, n, Mode::Read));
        assert_eq!(span(&later[1]), (BASE + 9 * n, n, Mode::Read));
        assert_eq!(span(&later[2]), (out, n, Mode::Write));
    }

    #[test]
    fn a_cover_is_learnt_as_its_part_in_each_parameters_buffer() {
        let m = model();
        // Three buffers: the kernel's two parameters point into the outer ones; the cover
        // of its overflowed table spans the middle one too.
        alloc(&m, BASE + SIZE, SIZE);
        alloc(&m, BASE + 2 * SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + 2 * SIZE, 8)];
        let words = [POINTER, POINTER];
        let cover = Access::new(BASE + 64, 2 * SIZE, Mode::Write);
        learn(&m, &learning(1, &words), &guess, Footprint { ranges: &[], covers: &[cover] });
        let mut later = vec![pointer(BASE + 0x100_0000, 0), pointer(BASE + 0x200_0000, 8)];
        assert_eq!(m.apply_learnt(1, &words, &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 0x100_0000 + 64, SIZE - 64, Mode::Write));
        assert_eq!(span(&later[1]), (BASE + 0x200_0000, 64, Mode::Write));
        assert_eq!(m.learnt_summary().covers, 1);
        assert_eq!(m.notes.entries()[0].kind, NoteKind::FootprintLearntCover);
        // An exact launch under the same key, in both buffers: the union is still a cover.
        let both = [Access::new(BASE + 16, 8, Mode::Read), Access::new(BASE + 2 * SIZE + 8, 8, Mode::Read)];
        learn(&m, &learning(1, &words), &guess, exact(&both));
        assert_eq!(m.learnt_summary().covers, 1);
        // A cover ending where the second parameter's buffer starts: that parameter's pointer
        // was not followed, and is no access.
        let short = Access::new(BASE + 64, SIZE - 64, Mode::Write);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        learn(&m, &learning(3, &words), &guess, Footprint { ranges: &[], covers: &[short] });
        let mut later = guess.to_vec();
        assert_eq!(m.apply_learnt(3, &words, &mut later, &[]), Lookup::Applied);
        assert_eq!(later.iter().map(span).collect::<Vec<_>>(), [(BASE + 64, SIZE - 64, Mode::Write)]);
        // A cover ending in a buffer no parameter points into: memory reached through memory.
        learn(&m, &learning(2, &words), &[pointer(BASE, 0)], Footprint { ranges: &[], covers: &[cover] });
        assert_eq!(m.apply_learnt(2, &words, &mut vec![pointer(BASE, 0)], &[]), Lookup::Unlearnable);
    }

    #[test]
    fn a_word_that_changes_without_moving_the_footprint_leaves_the_key() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE, 64, Mode::Write)];
        // Words: the pointer, a size (64), a step count.
        for step in 0..u64::from(IGNORED_AFTER) {
            assert_ne!(m.apply_learnt(1, &[POINTER, 64, step + 1], &mut vec![pointer(BASE, 0)], &[]), Lookup::Applied);
            learn(&m, &learning(1, &[POINTER, 64, step]), &guess, exact(&measured));
        }
        // Step IGNORED_AFTER: a second change with the same footprint.
        learn(&m, &learning(1, &[POINTER, 64, 99]), &guess, exact(&measured));
        let mut fresh = vec![pointer(BASE + 128, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 64, 12345], &mut fresh, &[]), Lookup::Applied);
        assert_eq!(span(&fresh[0]), (BASE + 128, 64, Mode::Write));
        // The size still makes a key of its own.
        assert_eq!(m.apply_learnt(1, &[POINTER, 128, 7], &mut fresh, &[]), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.learnt_summary().ignored_words, 1);
        // A launch that differs from the last only in that word, measured with another
        // footprint: a word that differed at every launch stays out of the key (in it, every
        // launch would be a new key), and the key's footprint holds both.
        learn(&m, &learning(1, &[POINTER, 64, 7]), &guess, exact(&[Access::new(BASE, 128, Mode::Write)]));
        assert_eq!(m.learnt_summary().ignored_words, 1);
        assert_eq!(m.apply_learnt(1, &[POINTER, 64, 12345], &mut fresh, &[]), Lookup::Applied);
        assert_eq!(span(&fresh[0]), (BASE + 128, 128, Mode::Write));
    }

    #[test]
    fn a_word_left_out_that_repeats_goes_back_into_the_key_when_the_footprint_moves_with_it() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let small = [Access::new(BASE, 64, Mode::Write)];
        // A flag that takes its values again, with the same footprint: it leaves the key.
        for flag in [0, 1, 0] {
            learn(&m, &learning(1, &[POINTER, 64, flag]), &guess, exact(&small));
        }
        assert_eq!(m.learnt_summary().ignored_words, 1);
        // A launch that differs only in that flag, with another footprint: it bears on it.
        learn(&m, &learning(1, &[POINTER, 64, 2]), &guess, exact(&[Access::new(BASE, 128, Mode::Write)]));
        assert_eq!(m.learnt_summary().ignored_words, 0);
        let mut later = vec![pointer(BASE + 128, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 64, 0], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 128, 64, Mode::Write));
        assert_eq!(
            m.apply_learnt(1, &[POINTER, 64, 5], &mut vec![pointer(BASE, 0)], &[]),
            Lookup::Unknown { kernel_seen: true }
        );
    }

    #[test]
    fn a_footprint_measured_in_buffers_laid_out_in_another_order_is_the_same_footprint() {
        // A read of one buffer and a write of another, a random generator's offset among the
        // words; the allocator swaps the buffers' places at every launch, so the engine's
        // ranges (in address order) come in the other order each time.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let (low, high) = (BASE, BASE + SIZE);
        for step in 0..=u64::from(IGNORED_AFTER) {
            let (input, output) = if step % 2 == 0 { (low, high) } else { (high, low) };
            let guess = [pointer(input, 0), pointer(output, 8)];
            let mut measured = [Access::new(input, 64, Mode::Read), Access::new(output, 64, Mode::Write)];
            measured.sort_unstable_by_key(|a| a.addr);
            learn(&m, &learning(1, &[POINTER, POINTER, step]), &guess, exact(&measured));
        }
        // The offset left the key: a launch with a new one is given what was learnt.
        let mut later = vec![pointer(low + 128, 0), pointer(high + 256, 8)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 1000], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (low + 128, 64, Mode::Read));
        assert_eq!(span(&later[1]), (high + 256, 64, Mode::Write));
        assert_eq!(m.learnt_summary().ignored_words, 1);
    }

    #[test]
    fn covers_that_reach_differently_do_not_keep_a_word_in_the_key() {
        // The kernel's largest launches overflow: their covers reach as far as the buffers
        // they span lie apart, with only a stale word differing. Its other launches still
        // learn that the stale word does not bear on their footprints.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        for (stale, reach) in [(1, 64), (2, 128)] {
            let cover = Access::new(BASE + SIZE - reach, 2 * reach, Mode::Write);
            learn(
                &m,
                &learning(1, &[POINTER, POINTER, 4096, stale]),
                &guess,
                Footprint { ranges: &[], covers: &[cover] },
            );
        }
        for stale in 3..6 {
            learn(&m, &learning(1, &[POINTER, POINTER, 64, stale]), &guess, exact(&write(64)));
        }
        let mut later = vec![pointer(BASE + 256, 0), pointer(BASE + SIZE, 8)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 64, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 256, 64, Mode::Write));
    }

    #[test]
    fn a_size_word_left_out_on_covers_goes_back_alone_when_the_footprint_moves() {
        // A copy kernel: its large launches overflow (their covers compare the same whatever
        // the size), its small ones are exact. Stale bytes beside the size (a structure's
        // padding) differ between exact launches of the same footprint. When a small launch
        // of another size moves the footprint, the size goes back into the key and the stale
        // word stays out of it.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        for (size, stale) in [(4096, 1), (8192, 1), (4096 * 3, 1)] {
            let cover = Access::new(BASE + SIZE - 64, 128, Mode::Write);
            let words = [POINTER, POINTER, size, stale];
            learn(&m, &learning(1, &words), &guess, Footprint { ranges: &[], covers: &[cover] });
        }
        for stale in [2, 3, 2] {
            learn(&m, &learning(1, &[POINTER, POINTER, 64, stale]), &guess, exact(&write(64)));
        }
        assert_eq!(m.learnt_summary().ignored_words, 2, "the size on covers, the stale word on exact launches");
        learn(&m, &learning(1, &[POINTER, POINTER, 128, 3]), &guess, exact(&write(128)));
        assert_eq!(m.learnt_summary().ignored_words, 1);
        // Keys merged while the size was out of them are one key again: a size is learnt anew
        // once, and then predicted whatever its stale bytes.
        learn(&m, &learning(1, &[POINTER, POINTER, 64, 5]), &guess, exact(&write(64)));
        let mut later = vec![pointer(BASE + 256, 0), pointer(BASE + SIZE, 8)];
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 64, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE + 256, 64, Mode::Write));
        let unknown = m.apply_learnt(1, &[POINTER, POINTER, 256, 99], &mut vec![pointer(BASE, 0)], &[]);
        assert_eq!(unknown, Lookup::Unknown { kernel_seen: true }, "the size is in the key");
    }

    #[test]
    fn a_kernel_that_always_overflows_is_predicted_between_samples() {
        // An optimizer's foreach kernel: every launch overflows its table, its cover's ends
        // fall where the warps that found the table full ran, and a step counter changes at
        // every launch. The counter leaves the key and later launches are predicted.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        let mut measured = 0;
        for step in 0..64u64 {
            let words = [POINTER, POINTER, 4096, step];
            if m.apply_learnt(1, &words, &mut guess.to_vec(), &[]) != Lookup::Applied {
                measured += 1;
                let (lo, hi) = (BASE + 64 * (step * 37 % 61), BASE + 2 * SIZE - 64 * (step * 53 % 59));
                let cover = Access::new(lo, hi - lo, Mode::ReadWrite);
                learn(&m, &learning(1, &words), &guess, Footprint { ranges: &[], covers: &[cover] });
            }
        }
        assert!(measured <= 12, "{measured} of 64 launches measured");
    }

    #[test]
    fn a_read_measured_as_read_write_at_one_launch_is_the_same_footprint() {
        // An input read at some launches and read and written at another: only a stale word
        // differs, and it leaves the key; the key keeps the union of the modes.
        let m = model();
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE / 2, 8)];
        for (stale, input) in [(1, Mode::Read), (2, Mode::ReadWrite), (3, Mode::Read)] {
            let measured = [Access::new(BASE, 64, input), Access::new(BASE + SIZE / 2, 64, Mode::Write)];
            learn(&m, &learning(1, &[POINTER, POINTER, stale]), &guess, exact(&measured));
        }
        let mut later = guess.to_vec();
        assert_eq!(m.apply_learnt(1, &[POINTER, POINTER, 99], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE, 64, Mode::ReadWrite));
        // A read that a flag turns into a write is another footprint: the flag stays.
        learn(&m, &learning(2, &[POINTER, POINTER, 0]), &guess, exact(&[Access::new(BASE, 64, Mode::Read)]));
        learn(&m, &learning(2, &[POINTER, POINTER, 1]), &guess, exact(&[Access::new(BASE, 64, Mode::Write)]));
        learn(&m, &learning(2, &[POINTER, POINTER, 0]), &guess, exact(&[Access::new(BASE, 64, Mode::Read)]));
        assert_eq!(m.apply_learnt(2, &[POINTER, POINTER, 1], &mut later, &[]), Lookup::Applied);
        assert_eq!(span(&later[0]), (BASE, 64, Mode::Write));
    }

    #[test]
    fn a_launch_that_overflowed_beside_one_that_did_not_keeps_no_word_in_the_key() {
        // One size, measured once with an overflowed table (a cover) and then exactly; only a
        // stale word differs between them: it does not bear on the footprint.
        let m = model();
        let guess = [pointer(BASE, 0)];
        let cover = Access::new(BASE, 64, Mode::Write);
        learn(&m, &learning(1, &[POINTER, 64, 1]), &guess, Footprint { ranges: &[], covers: &[cover] });
        for stale in 2..5 {
            learn(&m, &learning(1, &[POINTER, 64, stale]), &guess, exact(&write(64)));
        }
        assert_eq!(m.apply_learnt(1, &[POINTER, 64, 99], &mut vec![pointer(BASE, 0)], &[]), Lookup::Applied);
    }

    #[test]
    fn a_word_that_makes_a_launch_unlearnable_stays_in_the_key() {
        // Under one flag the kernel reaches memory through memory (no parameter points into
        // it), under the other only its parameter's buffer: the flag bears on the footprint.
        let m = model();
        alloc(&m, 0x40_0000, SIZE);
        let guess = [pointer(BASE, 0)];
        let elsewhere = [Access::new(0x40_0000, 64, Mode::Read)];
        for _ in 0..3 {
            learn(&m, &learning(1, &[POINTER, 0]), &guess, exact(&elsewhere));
            learn(&m, &learning(1, &[POINTER, 1]), &guess, exact(&write(64)));
        }
        assert_eq!(m.apply_learnt(1, &[POINTER, 1], &mut vec![pointer(BASE, 0)], &[]), Lookup::Applied);
        assert_eq!(m.apply_learnt(1, &[POINTER, 0], &mut vec![pointer(BASE, 0)], &[]), Lookup::Unlearnable);
    }

    #[test]
    fn a_word_that_alone_moved_the_footprint_stays_in_the_key() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        // The size word changes with the footprint, then three launches of one size agree.
        learn(&m, &learning(1, &[POINTER, 64]), &guess, exact(&write(64)));
        learn(&m, &learning(1, &[POINTER, 128]), &guess, exact(&write(128)));
        for _ in 0..3 {
            learn(&m, &learning(1, &[POINTER, 256]), &guess, exact(&write(256)));
        }
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 512], &mut at, &[]), Lookup::Unknown { kernel_seen: true });
        assert_eq!(m.apply_learnt(1, &[POINTER, 128], &mut at, &[]), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 128, Mode::Write));
    }

    #[test]
    fn a_word_that_moved_the_footprint_once_stays_in_the_key_when_it_changes_without_moving_it() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        // A size, rounded up to 128 bytes: it moved the footprint from 64 to 128, then,
        // once the launch of 64 is no longer among the recent ones, changes within the
        // rounding.
        learn(&m, &learning(1, &[POINTER, 64]), &guess, exact(&write(64)));
        for _ in 0..=RECENT {
            learn(&m, &learning(1, &[POINTER, 128]), &guess, exact(&write(128)));
        }
        for n in [120, 100, 110] {
            learn(&m, &learning(1, &[POINTER, n]), &guess, exact(&write(128)));
        }
        assert_eq!(m.learnt_summary().ignored_words, 0);
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &[POINTER, 4096], &mut at, &[]), Lookup::Unknown { kernel_seen: true });
    }

    #[test]
    fn words_past_the_64th_leave_the_key_as_the_first_ones_do() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let measured = [Access::new(BASE, 64, Mode::Write)];
        // 130 words: the pointer, a size, and three that change without moving the footprint:
        // word 64 first, then words 2 and 129 (each set of ignored words then grows or is
        // written below a word it holds).
        let words = |w64: u64, w2: u64, w129: u64| {
            let mut words = vec![0; 130];
            (words[0], words[1], words[2], words[64], words[129]) = (POINTER, 64, w2, w64, w129);
            learning(1, &words)
        };
        for w64 in 0..=u64::from(IGNORED_AFTER) {
            learn(&m, &words(w64, 0, 0), &guess, exact(&measured));
        }
        assert_eq!(m.learnt_summary().ignored_words, 1);
        // Launches alike (compared with nothing) until only the last word 64 is recent.
        for _ in 0..RECENT {
            learn(&m, &words(u64::from(IGNORED_AFTER), 0, 0), &guess, exact(&measured));
        }
        for w in 1..=u64::from(IGNORED_AFTER) {
            learn(&m, &words(u64::from(IGNORED_AFTER), w, w), &guess, exact(&measured));
        }
        assert_eq!(m.learnt_summary().ignored_words, 3);
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &words(77, 77, 77).words, &mut at, &[]), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 64, Mode::Write));
    }

    #[test]
    fn launches_under_one_key_keep_the_union_of_their_extents() {
        let m = model();
        let guess = [pointer(BASE, 0)];
        let words = [POINTER, 1];
        learn(&m, &learning(1, &words), &guess, exact(&[Access::new(BASE, 64, Mode::Read)]));
        learn(&m, &learning(1, &words), &guess, exact(&[Access::new(BASE + 32, 64, Mode::Write)]));
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &words, &mut at, &[]), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 96, Mode::ReadWrite));
        // A third, inside the hull of the two, leaves it whole.
        learn(&m, &learning(1, &words), &guess, exact(&[Access::new(BASE + 8, 8, Mode::Read)]));
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &words, &mut at, &[]), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE, 96, Mode::ReadWrite));
        // Under another key, two extents past the pointer: their hull starts past it too.
        let words = [POINTER, 2];
        for at in [BASE + 16, BASE + 48] {
            learn(&m, &learning(1, &words), &guess, exact(&[Access::new(at, 16, Mode::Write)]));
        }
        let mut at = vec![pointer(BASE, 0)];
        assert_eq!(m.apply_learnt(1, &words, &mut at, &[]), Lookup::Applied);
        assert_eq!(span(&at[0]), (BASE + 16, 48, Mode::Write));
    }

    #[test]
    fn a_step_word_leaves_the_key_of_a_kernel_that_runs_many_footprints_in_turn() {
        // A foreach kernel as an optimizer step runs it: one launch per chunk of a tensor
        // list (12 chunks of different sizes, more than RECENT), every launch of a step
        // with the step's bias correction among its words. Each chunk meets its own
        // footprint again only a step later.
        let m = model();
        let chunk = |c: u64| 64 * (c + 1);
        let (mut measured_per_step, mut sampled_per_step) = (Vec::new(), Vec::new());
        for step in 0..6u64 {
            let bias_correction = 0x3f80_0000 + step * 977;
            let (mut measured, mut sampled) = (0, 0);
            for c in 0..12 {
                let words = [POINTER, chunk(c), bias_correction];
                let mut at = vec![pointer(BASE, 0)];
                let lookup = m.apply_learnt(1, &words, &mut at, &[]);
                if lookup == Lookup::Applied {
                    assert_eq!(span(&at[0]), (BASE, chunk(c), Mode::ReadWrite));
                } else {
                    if lookup == Lookup::Sample {
                        sampled += 1;
                    } else {
                        measured += 1;
                    }
                    learn(
                        &m,
                        &learning(1, &words),
                        &[pointer(BASE, 0)],
                        exact(&[Access::new(BASE, chunk(c), Mode::ReadWrite)]),
                    );
                }
            }
            measured_per_step.push(measured);
            sampled_per_step.push(sampled);
        }
        // In the second step, two chunks measured again each see the word changed under
        // their own footprint: it leaves the key, and every later launch stands on what was
        // learnt.
        assert_eq!(measured_per_step, [12, 2, 0, 0, 0, 0]);
        // What was learnt is checked at each key's 4th launch (counting the one it was learnt
        // from), and agrees.
        assert_eq!(sampled_per_step, [0, 0, 0, 10, 2, 0]);
    }

    #[test]
    fn a_step_word_leaves_the_key_of_chunks_whose_covers_reach_differently_at_every_step() {
        // The same foreach kernel, each launch's table overflowing in its second buffer: the
        // chunk's bytes in the first are exact, the cover in the second reaches as far as the
        // warps ran before the table was full, never twice the same. A chunk's footprint a
        // step later is the same bytes all the same, so the step's word leaves the key.
        let m = model();
        alloc(&m, BASE + SIZE, SIZE);
        let chunk = |c: u64| 64 * (c + 1);
        let guess = [pointer(BASE, 0), pointer(BASE + SIZE, 8)];
        let mut measured_per_step = Vec::new();
        for step in 0..6u64 {
            let mut measured = 0;
            for c in 0..12 {
                let words = [POINTER, POINTER, chunk(c), 0x3f80_0000 + step * 977];
                let lookup = m.apply_learnt(1, &words, &mut guess.to_vec(), &[]);
                if lookup != Lookup::Applied {
                    measured += usize::from(matches!(lookup, Lookup::Unknown { .. }));
                    let cover = Access::new(BASE + SIZE, 64 * (1 + (step * 7 + c) % 13), Mode::Write);
                    let ranges = [Access::new(BASE, chunk(c), Mode::ReadWrite)];
                    learn(&m, &learning(1, &words), &guess, Footprint { ranges: &ranges, covers: &[cover] });
                }
            }
            measured_per_step.push(measured);
        }
        assert_eq!(measured_per_step[3..], [0, 0, 0], "{measured_per_step:?}");
    }

    #[test]
    fn a_sample_that_contradicts_what_was_learnt_replaces_it() {
        // A gather: its words never change, the bytes it writes follow an index buffer.
        let m = model();
        let words = [POINTER, 64];
        let (guess, first, second) =
            ([pointer(BASE, 0)], [Access::new(BASE, 64, Mode::Write)], [Access::new(BASE + 4096, 64, Mode::Write)]);
        learn(&m, &learning(1, &words), &guess, exact(&first));
        // Launches 2 to 16 of the key: the 4th, 8th and 16th are measured to check.
        let lookups: Vec<Lookup> = (2..=16).map(|_| m.apply_learnt(1, &words, &mut guess.to_vec(), &[])).collect();
        let sampled: Vec<usize> =
            (2..=16).zip(&lookups).filter(|(_, l)| **l == Lookup::Sample).map(|(n, _)| n).collect();
        assert_eq!(sampled, [4, 8, 16]);
        assert!(lookups.iter().all(|l| matches!(l, Lookup::Sample | Lookup::Applied)));
        // The 16th launch's footprint: it moved. What was learnt gives way, and the next
        // launch is measured again.
        learn(&m, &learning(1, &words), &guess, exact(&second));
        assert_eq!(m.apply_learnt(1, &words, &mut guess.to_vec(), &[]), Lookup::Sample);
        learn(&m, &learning(1, &words), &guess, exact(&second));
        let mut at = guess.to_vec();
        assert_eq!(m.apply_learnt(1, &words, &mut at, &[]), Lookup::Applied);
        assert_eq!(at.iter().map(span).collect::<Vec<_>>(), [(BASE + 4096, 64, Mode::Write)]);
        // Launches 6 and 7 applied, the 8th a sample that agrees: it changes nothing.
        for _ in 6..8 {
            m.apply_learnt(1, &words, &mut guess.to_vec(), &[]);
        }
        assert_eq!(m.apply_learnt(1, &words, &mut guess.to_vec(), &[]), Lookup::Sample);
        learn(&m, &learning(1, &words), &guess, exact(&second));
        let mut at = guess.to_vec();
        assert_eq!(m.apply_learnt(1, &words, &mut at, &[]), Lookup::Applied);
        assert_eq!(at.iter().map(span).collect::<Vec<_>>(), [(BASE + 4096, 64, Mode::Write)]);
        assert_eq!(m.learnt_summary().keys, 1);
    }

    #[test]
    fn a_footprint_that_moves_at_every_sample_is_not_measured_at_every_launch() {
        // A gather whose bytes move at each launch: the first contradiction has the next launch
        // measured again, the second in a row leaves the schedule as it was (powers of two).
        let m = model();
        let words = [POINTER, 64];
        let guess = [pointer(BASE, 0)];
        let at = |k: u64| [Access::new(BASE + 4096 * (k % 8), 64, Mode::Write)];
        learn(&m, &learning(1, &words), &guess, exact(&at(0)));
        let mut sampled = Vec::new();
        for n in 2..=64u64 {
            if m.apply_learnt(1, &words, &mut guess.to_vec(), &[]) == Lookup::Sample {
                sampled.push(n);
                learn(&m, &learning(1, &words), &guess, exact(&at(n)));
            }
        }
        // The 4th contradicts: the count starts again at 3, and the 5th (its 4th) is measured.
        // It contradicts too: the count goes on, its 8th, 16th and 32nd are measured.
        assert_eq!(sampled, [4, 5, 9, 17, 33]);
    }

    #[test]
    fn keys_learnt_one_after_another_are_checked_at_different_launches() {
        // A training step's kernels, each learnt at the first step: one key each, launched
        // once a step. The 4th step checks all of them; in each later doubling they are
        // checked once each, spread over its first half rather than all at one step.
        let m = model();
        let keys = 8u64;
        let guess = [pointer(BASE, 0)];
        for kernel in 0..keys {
            learn(&m, &learning(kernel, &[POINTER, 64]), &guess, exact(&write(64)));
        }
        let mut checked_at: Vec<Vec<u64>> = vec![Vec::new(); 33];
        for step in 2..=32u64 {
            for kernel in 0..keys {
                let words = [POINTER, 64];
                if m.apply_learnt(kernel, &words, &mut guess.to_vec(), &[]) == Lookup::Sample {
                    checked_at[step as usize].push(kernel);
                    learn(&m, &learning(kernel, &words), &guess, exact(&write(64)));
                }
            }
        }
        let per_step: Vec<usize> = checked_at.iter().map(Vec::len).collect();
        assert_eq!(per_step[4], keys as usize);
        // Each key once in 8..16 and once in 16..32.
        for (from, to) in [(8, 16), (16, 32)] {
            let mut seen: Vec<u64> = checked_at[from..to].concat();
            seen.sort_unstable();
            assert_eq!(seen, (0..keys).collect::<Vec<_>>(), "steps {from}..{to}: {per_step:?}");
        }
        // Spread: 8 keys over the 8th-11th launches and the 16th-23rd, at most 2 and 1 a step.
        assert!(per_step[8..16].iter().all(|&n| n <= 2), "{per_step:?}");
        assert!(per_step[16..32].iter().all(|&n| n <= 1), "{per_step:?}");
    }

    #[test]
    fn a_key_that_holds_is_checked_once_a_doubling_then_once_a_quadrupling() {
        // One key launched up to its 1,023rd launch (the first is the one it was learnt
        // from), every check confirming it: the 4th launch, one in each doubling up to the
        // 64th, then one in each quadrupling.
        let m = model();
        let (words, guess) = ([POINTER, 64], [pointer(BASE, 0)]);
        learn(&m, &learning(1, &words), &guess, exact(&write(64)));
        let mut checked = Vec::new();
        for n in 2..1024u32 {
            if m.apply_learnt(1, &words, &mut guess.to_vec(), &[]) == Lookup::Sample {
                checked.push(n);
                learn(&m, &learning(1, &words), &guess, exact(&write(64)));
            }
        }
        let periods = [(4, 5), (8, 16), (16, 32), (32, 64), (64, 256), (256, 1024)];
        let per_period: Vec<usize> =
            periods.iter().map(|&(from, to)| checked.iter().filter(|&&n| from <= n && n < to).count()).collect();
        assert_eq!(per_period, [1; 6], "checked at {checked:?}");
        assert_eq!(checked.len(), 6, "checked at {checked:?}");
    }

    /// A small deterministic generator for the property test below.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn learnt_extents_cover_what_every_launch_touches_when_the_footprint_follows_its_words() {
        // Kernels whose footprint follows some of their words (a size; a mode flag, for half
        // of them) and not others (a step, a seed, the flag for the other half): whenever a
        // launch is given learnt extents, they hold every byte it touches, in a mode at least
        // as strong. (A word that moves the footprint only at values never measured is out
        // of reach: see `docs/footprints.md`.)
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for kernel in 0..200u64 {
            let m = Model::default();
            alloc(&m, BASE, 1 << 24);
            let sizes = 1 + rng.next() % 4;
            let moody = rng.next().is_multiple_of(2);
            let mut applied = 0;
            for _ in 0..60 {
                let n = 64 * (1 + rng.next() % sizes);
                let flag = rng.next() % 3;
                let words = [POINTER, n, flag, rng.next(), POINTER, rng.next() % 5];
                let (p, q) = (BASE + 4096 * (rng.next() % 64), BASE + (1 << 23) + 4096 * (rng.next() % 64));
                let guess = [pointer(p, 0), pointer(q, 32)];
                // n bytes from p, read; when `moody`, written under flag 1 and read 32 bytes
                // further under flag 2; and n / 2 bytes of q from its 16th, written.
                let (mode, extra) = match (moody, flag) {
                    (true, 1) => (Mode::Write, 0),
                    (true, 2) => (Mode::Read, 32),
                    _ => (Mode::Read, 0),
                };
                let truth = [Access::new(p, n + extra, mode), Access::new(q + 16, n / 2, Mode::Write)];
                let mut at = guess.to_vec();
                if m.apply_learnt(kernel, &words, &mut at, &[]) == Lookup::Applied {
                    applied += 1;
                    for (t, a) in truth.iter().zip(&at) {
                        assert!(a.addr <= t.addr && t.addr + t.len <= a.addr + a.len, "{t:?} in {a:?}");
                        assert!(a.mode == t.mode || a.mode == Mode::ReadWrite, "{t:?} as {a:?}");
                    }
                } else {
                    learn(&m, &learning(kernel, &words), &guess, exact(&truth));
                }
            }
            assert!(applied > 10, "kernel {kernel}: learnt extents applied {applied} times in 60");
        }
    }
}
