//! Work: kernel launches, copies and memsets, each access checked against its buffer's
//! allocation, history and free, then recorded (`docs/semantics.md#accesses-and-races`).

use std::sync::Arc;

use crate::hash::FastSet;
use crate::model::buffers::{Buffer, BufferState, Found, MemoryKind};
use crate::model::clock::{Epoch, Slot, VectorClock};
use crate::model::definition::NodeKind;
use crate::model::footprint::pending;
use crate::model::op::{Access, GridWait, HostEffect, Mode, OpRecord, Overlap, WaitPlace};
use crate::model::race::{Action, BufferFacts, Hazard, NoteKind, Race, RaceKind, Side};
use crate::model::streams::{StreamRef, StreamState};
use crate::model::{Model, Work};
use crate::phases::{self, Tally};

impl Model {
    /// A kernel launch, copy or memset on `stream`: each access is checked against the
    /// buffer's allocation and history, then recorded. While the stream captures, the work
    /// becomes a node instead. Returns the operation's epoch (None for a node).
    pub fn work(&self, stream: StreamRef, work: Work<'_>) -> Option<Epoch> {
        // Their buffers loaded together, before any is needed ([`BufferMap::prefetch`]); a
        // lone access (a copy's, a memset's) has nothing to load beside.
        if work.accesses.len() > 1 {
            self.buffers.prefetch(work.accesses.iter().map(|a| a.addr));
        }
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Work { accesses: work.accesses.to_vec() }, &work.origin, work.kernel)
        {
            return None;
        }
        if work.host == HostEffect::WaitsForEarlierWork {
            self.host_joins(&stream);
        }
        let mut found = Vec::new();
        let (mut state, epoch) = self.issue(&stream);
        let op = OpRecord::new(&work.origin, work.kernel, epoch);
        let overlap = self.overlapping(&mut state, stream.slot, op, work.kernel.is_some());
        self.accesses_now(work.accesses, op, &state.clock, &overlap, &mut found);
        drop(state);
        if work.host == HostEffect::WaitsForOperation {
            self.host_joins(&stream);
        }
        self.publish(found);
        Some(epoch)
    }

    /// The next kernel launched on `stream` is programmatic (asked per launch or per stream),
    /// its kernel's wait `wait`: on the stream it may overlap the kernel before it
    /// ([`Model::overlapping`]); captured, its node's edges from the stream's last nodes are
    /// programmatic ([`Model::capture_node`]).
    pub fn programmatic_next_launch(&self, stream: StreamRef, wait: GridWait) {
        self.stream(stream).lock().programmatic_next = Some(wait);
    }

    /// After `op` was issued on the stream of `slot` (`kernel`: a launch): how its accesses
    /// are ordered after the kernel just before it on the stream, when it is a programmatic
    /// launch (`docs/semantics.md#programmatic-dependent-launch`). Where that kernel is not
    /// otherwise ordered before it (the host joined it), it may run beside it: until the end
    /// if its kernel never waits on its grid dependencies, until its first wait if it waits.
    /// Its overlapping accesses are checked with the stream's clock but for that kernel;
    /// everything before that kernel stays ordered.
    pub(in crate::model) fn overlapping(
        &self,
        state: &mut StreamState,
        slot: Slot,
        op: OpRecord,
        kernel: bool,
    ) -> Overlap {
        let programmatic = state.programmatic_next.take().filter(|_| kernel);
        let before = std::mem::replace(&mut state.last_kernel, kernel.then_some(op.epoch.time));
        let Some(wait) = programmatic else { return Overlap::None };
        let primary = op.epoch.time.checked_sub(1).filter(|&p| before == Some(p) && self.host.get(slot) < p);
        let beside = primary.map(|primary| {
            let mut clock = state.clock.clone();
            clock.set(slot, primary - 1);
            clock
        });
        Overlap::of(wait, beside, &state.clock)
    }

    /// Checks and records `accesses` of `op` as it is issued, each with the clock `overlap`
    /// gives it (`ordered`: the operation's own), noting a programmatic launch whose accesses
    /// have no place around its wait.
    pub(in crate::model) fn accesses_now(
        &self,
        accesses: &[Access],
        op: OpRecord,
        ordered: &VectorClock,
        overlap: &Overlap,
        found: &mut Vec<Race>,
    ) {
        self.note_unplaced(overlap, accesses, op);
        for access in accesses {
            self.access(access, overlap.clock(access, ordered), op, Checked::Now, found);
        }
    }

    /// Notes `op`, a programmatic launch of a kernel that waits on its grid dependencies,
    /// when one of its accesses has no place around the wait: it is taken as ordered, and a
    /// race of it before the wait would go unseen.
    pub(in crate::model) fn note_unplaced(&self, overlap: &Overlap, accesses: &[Access], op: OpRecord) {
        if matches!(overlap, Overlap::BeforeWait(_)) && accesses.iter().any(|a| a.place == WaitPlace::Unknown) {
            self.notes.add(NoteKind::ProgrammaticLaunch, op, 0);
        }
    }

    /// Checks and records one access by `op`, whose clock is `clock`: as it is issued
    /// ([`Checked::Now`]), or late, for a measured launch whose footprint arrived after other
    /// operations were issued ([`Checked::Late`], `crate::model::footprint::pending`).
    pub(in crate::model) fn access(
        &self,
        access: &Access,
        clock: &VectorClock,
        op: OpRecord,
        checked: Checked<'_>,
        found: &mut Vec<Race>,
    ) {
        let end = access.addr.saturating_add(access.len.max(1));
        let mut addr = access.addr;
        // An access may span adjacent buffers (a copy over two): take each in turn.
        for _ in 0..8 {
            // Checked late, the buffer a pointer met at issue, freed and its address handed
            // out again since or not: its history is what the launch met.
            if let Some(buffer) = checked.met(addr) {
                addr = self.access_in(buffer, addr, end, access, clock, op, checked, found);
                if addr >= end {
                    return;
                }
                continue;
            }
            let next = self.buffers.with(addr, |buffer_at| match buffer_at {
                Found::Live(buffer) if checked.allocated_later(buffer.id) => buffer.end(),
                Found::Live(buffer) => self.access_in(buffer, addr, end, access, clock, op, checked, found),
                Found::Freed(buffer) => {
                    let freed = buffer.lock().freed;
                    match freed {
                        // Checked late, a launch issued before the free met the buffer live:
                        // checked against, and recorded beside, the other launches issued
                        // before the free and read after it (a synchronous free, with no
                        // synchronize before it, comes before their footprints are read).
                        Some(free) if checked.issued_later(&free.epoch) && !checked.allocated_later(buffer.id) => {
                            self.access_in(buffer, addr, end, access, clock, op, checked, found)
                        }
                        Some(free) if access.exact && !checked.issued_later(&free.epoch) => {
                            let hi = end.min(buffer.end());
                            let this = Side { op, action: Action::Access { mode: access.mode, lo: addr, hi } };
                            let first = Side { op: free, action: Action::Free };
                            found.push(Race {
                                kind: RaceKind::UseAfterFree,
                                hazard: None,
                                buffer: BufferFacts::of(buffer),
                                first,
                                second: this,
                            });
                            buffer.end()
                        }
                        _ => buffer.end(),
                    }
                }
                Found::Nothing => end,
            });
            if next >= end {
                return;
            }
            addr = next;
        }
    }

    /// [`Model::access`] in one buffer, from `addr` to `end` or the buffer's end (returned):
    /// checked against the buffer's allocation and history, then recorded.
    #[allow(clippy::too_many_arguments)]
    fn access_in(
        &self,
        buffer: &Buffer,
        addr: u64,
        end: u64,
        access: &Access,
        clock: &VectorClock,
        op: OpRecord,
        checked: Checked<'_>,
        found: &mut Vec<Race>,
    ) -> u64 {
        let (lo, hi) = (addr, end.min(buffer.end()));
        let mut state = buffer.lock();
        // Host and managed memory may be written by the host, unseen: never fresh.
        let device_only = !buffer.kind.is_host() && buffer.kind != MemoryKind::Managed;
        let mode = self
            .directions
            .resolve(access.mode, op.kernel, access.slot, || device_only && state.shadow.untouched(lo, hi));
        let is_shared = state.shared.is_some();
        if let BufferState { shared: Some(shared), shadow, .. } = &mut *state {
            self.exchange_access(shared, shadow, (lo, hi, mode), op, Some((clock, checked.issued_at())));
        }
        let this = Side { op, action: Action::Access { mode, lo, hi } };
        let facts = || BufferFacts::of(buffer);
        if !buffer.alloc.epoch.happens_before(clock) {
            let alloc = Side { op: buffer.alloc, action: Action::Alloc };
            found.push(Race {
                kind: RaceKind::UseBeforeAlloc,
                hazard: None,
                buffer: facts(),
                first: alloc,
                second: this,
            });
        }
        phases::tally(Tally::ShadowRecords, state.shadow.records().len());
        phases::tally(Tally::RecordsCompared, state.shadow.compared(op.epoch));
        for earlier in state.shadow.conflicts(lo, hi, access.residues, mode, op.epoch, clock) {
            // Checked late, the launch meets what the log checks: skip it here.
            if checked.issued_later(&earlier.op.epoch) {
                continue;
            }
            // Another process's access that knew of this one, or was over before it.
            if self.peers.no_race(earlier.op.epoch, op.epoch, || checked.issued_at()) {
                continue;
            }
            let mut first =
                Side { op: earlier.op, action: Action::Access { mode: earlier.mode, lo: earlier.lo, hi: earlier.hi } };
            let mut second = this;
            // Another process's access issued after this one (this one's check came late, a
            // measured launch's): told in the order they were issued.
            if is_shared && self.peers.issued_after(earlier.op.epoch, checked.issued_at()) {
                (first, second) = (second, first);
            }
            let hazard = Hazard::between(access_mode(&first), access_mode(&second));
            found.push(Race { kind: RaceKind::CrossStream, hazard: Some(hazard), buffer: facts(), first, second });
        }
        // Checked late, it supersedes only what it is ordered after: never the records of
        // operations issued after it.
        state.shadow.record(lo, hi, access.residues, mode, op, clock);
        drop(state);
        if let Checked::Now = checked {
            self.pending.observe((lo, hi, access.residues), mode, buffer.id, None, op, clock);
        }
        hi
    }
}

/// The mode of an access's side of a race.
fn access_mode(side: &Side) -> Mode {
    match side.action {
        Action::Access { mode, .. } => mode,
        Action::Alloc | Action::Free => Mode::Write,
    }
}

/// When an access is checked.
#[derive(Clone, Copy)]
pub(in crate::model) enum Checked<'a> {
    /// As its operation is issued.
    Now,
    /// Late, for a measured launch: buffers allocated from `next_buffer` on came after it,
    /// `met` are those its pointers were in (wherever they are now), `later` holds the
    /// operations issued after it (the log checks those against it), and it was issued at
    /// `issued_at` ([`crate::model::peers::now`]).
    Late { next_buffer: u64, met: &'a [Arc<Buffer>], later: &'a FastSet<Epoch>, issued_at: u64 },
}

impl<'a> Checked<'a> {
    /// Checked late, the buffer at `addr` that one of the launch's pointers met at issue.
    fn met(self, addr: u64) -> Option<&'a Arc<Buffer>> {
        match self {
            Checked::Late { met, .. } => pending::met_at(met, addr),
            Checked::Now => None,
        }
    }

    fn allocated_later(self, buffer: u64) -> bool {
        matches!(self, Checked::Late { next_buffer, .. } if buffer >= next_buffer)
    }

    /// When the operation was issued: now, or the measured launch's issue.
    fn issued_at(self) -> u64 {
        match self {
            Checked::Now => crate::model::peers::now(),
            Checked::Late { issued_at, .. } => issued_at,
        }
    }

    fn issued_later(self, epoch: &Epoch) -> bool {
        matches!(self, Checked::Late { later, .. } if later.contains(epoch))
    }
}

#[cfg(test)]
mod tests {
    use crate::model::buffers::MemoryKind;
    use crate::model::op::{Access, GridWait, HostEffect, Mode, Origin, WaitPlace};
    use crate::model::race::{NoteKind, RaceKind};
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, Model, Work};

    const BUFFER: u64 = 0x10_0000;
    const STREAM: StreamRef = StreamRef::Handle(0x10);

    /// A kernel writes a buffer on a stream; then the next kernel on the stream reads it, its
    /// access placed `place` around its kernel's first grid-dependency wait, launched
    /// programmatically (its kernel waiting somewhere) where `programmatic`, after the host
    /// synchronized with the stream where `joined`. The races and notes found.
    fn dependent(place: WaitPlace, programmatic: bool, joined: bool) -> (Vec<RaceKind>, Vec<NoteKind>) {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        model.alloc(
            Alloc { base: BUFFER, size: 256, kind: MemoryKind::Device, ctx: 1 },
            None,
            &Origin::test("cuMemAlloc", 2),
        );
        let kernel = |name, access: Access, site| {
            let kernel = Some(model.kernel_id(name, name));
            let origin = Origin::test("cuLaunchKernelEx", site);
            model.work(STREAM, Work { origin, kernel, accesses: &[access], host: HostEffect::None });
        };
        kernel("primary", Access::new(BUFFER, 64, Mode::Write), 3);
        if joined {
            model.stream_synchronized(STREAM);
        }
        if programmatic {
            model.programmatic_next_launch(STREAM, GridWait::Unseen);
        }
        kernel("dependent", Access { place, ..Access::new(BUFFER, 64, Mode::Read) }, 4);
        (model.races().iter().map(|r| r.race.kind).collect(), model.notes().iter().map(|n| n.kind).collect())
    }

    /// A programmatic launch of a kernel that waits on its grid dependencies overlaps the
    /// kernel ahead of it with what it touches before its wait, and with nothing else; an
    /// access whose place is not known is ordered, and the launch noted. A launch that is not
    /// programmatic, or whose primary the host joined, is ordered whatever its marks say.
    #[test]
    fn a_programmatic_launch_overlaps_the_kernel_ahead_with_its_accesses_before_its_wait() {
        let noted = vec![NoteKind::ProgrammaticLaunch];
        assert_eq!(dependent(WaitPlace::Before, true, false), (vec![RaceKind::CrossStream], vec![]));
        assert_eq!(dependent(WaitPlace::After, true, false), (vec![], vec![]));
        assert_eq!(dependent(WaitPlace::Unknown, true, false), (vec![], noted));
        assert_eq!(dependent(WaitPlace::Before, false, false), (vec![], vec![]));
        assert_eq!(dependent(WaitPlace::Before, true, true), (vec![], vec![]));
    }
}
