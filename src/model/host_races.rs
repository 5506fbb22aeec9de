//! The model's side of host races: whether the host has joined a copy, memset or kernel in
//! flight, and the race when it touched that operation's bytes first. The host's loads and stores are not driver
//! calls: the shim's page guard (`shim/src/host_races`) catches them and asks here.

use std::sync::atomic::Ordering;

use super::buffers::{Found, MemoryKind};
use super::clock::{Epoch, Slot, HOST};
use super::op::{Access, Mode, OpRecord, Origin};
use super::race::{Action, BufferFacts, Hazard, NoteKind, Race, RaceKind, Side};
use super::residue::{self, DENSE};
use super::streams::{SlotOwner, StreamRef};
use super::Model;

/// Host accesses waiting for a footprint at most; beyond, the oldest go.
const MAX_UNSURE: usize = 1024;

/// The `api` of a host's access: not a driver call.
pub const HOST_API: &str = "host";

/// A load or store of the host, or a system call's copy to or from the program's memory:
/// bytes `[lo, hi)`. A fault tells the address only, so a load or store is taken as its
/// first byte; a system call's bytes are known.
#[derive(Clone, Copy, Debug)]
pub struct HostAccess {
    pub origin: Origin,
    pub mode: Mode,
    pub lo: u64,
    pub hi: u64,
}

/// The bytes `[lo, hi)` the host reaches of an asynchronous operation `op`: a copy's pinned
/// host side, managed or host memory a kernel or memset uses. Read (`Mode::Read`: the
/// source of a host-to-device copy, what a kernel only reads) or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceBytes {
    pub op: OpRecord,
    pub mode: Mode,
    pub lo: u64,
    pub hi: u64,
}

impl Model {
    /// Counts the changes of the host's clock: while it stays the same, the host has joined
    /// no further operation.
    pub fn host_version(&self) -> u64 {
        self.host.version.load(Ordering::Acquire)
    }

    /// Whether the host has synchronized with the operation of `epoch`: `H[slot] >= time`.
    pub fn host_has_joined(&self, epoch: Epoch) -> bool {
        epoch.time <= self.host.get(epoch.slot)
    }

    /// Whether a `cuCtxSynchronize` of `ctx`, made after the operation of `epoch` was issued,
    /// joins it: the operation ran on a stream of `ctx`. Known before the synchronize is told
    /// (the guard lifts such a copy as the call returns, without the work queued before it);
    /// once told, [`Model::host_has_joined`] says the same.
    pub fn context_sync_joins(&self, ctx: u64, epoch: Epoch) -> bool {
        matches!(self.slot_owner(epoch), SlotOwner::Stream { ctx: owner, .. } if owner == ctx)
    }

    /// The slot of `stream`, made on first sight: an operation queued on it has this slot
    /// before the model is told it and gives it its time.
    pub fn slot_of(&self, stream: StreamRef) -> Slot {
        self.stream(stream).slot
    }

    /// Whether a `cuStreamSynchronize` of `stream`, made after the operation of `epoch` was
    /// issued, joins it: the operation ran on that stream (known as [`Model::context_sync_joins`]).
    pub fn stream_sync_joins(&self, stream: StreamRef, epoch: Epoch) -> bool {
        epoch.slot != HOST && self.stream(stream).slot == epoch.slot
    }

    /// The host made `access` inside `work`'s bytes before it synchronized with that operation: a
    /// host race (RAW: the host read what the device was writing; WAW: both wrote; WAR: the
    /// host wrote what the device was reading).
    ///
    /// Bytes guarded for a measured launch before its footprint is known (`work.mode`
    /// [`Mode::Unknown`]: memory it may reach through pointers it loads) wait for the
    /// footprint ([`Model::host_accesses_measured`]).
    pub fn host_race(&self, work: DeviceBytes, access: HostAccess) {
        if work.mode == Mode::Unknown {
            let mut unsure = self.host_unsure.lock().unwrap_or_else(|e| e.into_inner());
            if unsure.len() >= MAX_UNSURE {
                unsure.remove(0);
            }
            unsure.push((work, access));
            return;
        }
        let buffer = match self.buffers.find(work.lo) {
            Found::Live(buffer) | Found::Freed(buffer) => BufferFacts::of(&buffer),
            // Freed and forgotten since: the operation's own bytes stand for the buffer.
            Found::Nothing => BufferFacts {
                id: 0,
                base: work.lo,
                size: work.hi - work.lo,
                kind: MemoryKind::PinnedHost,
                handle: 0,
                alloc: work.op,
            },
        };
        let host = OpRecord::new(&access.origin, None, Epoch::new(HOST, self.host.get(HOST)));
        let race = Race {
            kind: RaceKind::HostRace,
            hazard: Some(Hazard::between(work.mode, access.mode)),
            buffer,
            first: Side { op: work.op, action: Action::Access { mode: work.mode, lo: work.lo, hi: work.hi } },
            second: Side { op: host, action: Action::Access { mode: access.mode, lo: access.lo, hi: access.hi } },
        };
        self.publish(vec![race]);
    }

    /// The footprint of the measured launch `op` was read (`accesses`; None: it could not
    /// be): the host's accesses to bytes guarded for it while it was unknown are races where
    /// the launch touched those bytes in a mode that conflicts.
    pub(in crate::model) fn host_accesses_measured(&self, op: OpRecord, accesses: Option<&[Access]>) {
        let waited: Vec<(DeviceBytes, HostAccess)> = {
            let mut unsure = self.host_unsure.lock().unwrap_or_else(|e| e.into_inner());
            if unsure.is_empty() {
                return;
            }
            let (of_op, others) = unsure.drain(..).partition(|(work, _)| work.op.epoch == op.epoch);
            *unsure = others;
            of_op
        };
        let Some(accesses) = accesses else { return };
        for (work, host) in waited {
            let touched = |a: &&Access| {
                let (lo, hi) = (a.addr.max(host.lo), (a.addr + a.len.max(1)).min(host.hi.max(host.lo + 1)));
                lo < hi
                    && residue::meet(a.residues, DENSE, lo, hi)
                    && (host.mode == Mode::Write || a.mode != Mode::Read)
            };
            if let Some(a) = accesses.iter().find(touched) {
                let mode = if a.mode == Mode::Read { Mode::Read } else { Mode::Write };
                self.host_race(DeviceBytes { op: work.op, mode, lo: a.addr, hi: a.addr + a.len.max(1) }, host);
            }
        }
    }

    /// The host touched other data on `page`, guarded for `work`, and the shim left the page
    /// unprotected (a system call into it, or accesses there over and over): not a race, but
    /// the guard was lifted from the page (a note, once per operation's call site). Bytes
    /// guarded before a footprint was known are no operation's yet: no note.
    pub fn host_guard_gave_up(&self, work: DeviceBytes, page: u64) {
        if work.mode != Mode::Unknown {
            self.notes.add(NoteKind::HostGuardGaveUp, work.op, page);
        }
    }

    /// Up to `limit` live managed buffers, newest first, as `[base, end)`.
    pub fn managed_buffers(&self, limit: usize) -> Vec<(u64, u64)> {
        self.buffers.live_of_kind(MemoryKind::Managed, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::{Access, HostEffect};
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, Work};

    fn origin(api: &'static str) -> Origin {
        Origin::test(api, 0)
    }

    #[test]
    fn a_copy_is_joined_by_a_synchronize_of_its_stream_only() {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &origin("cuStreamCreate"));
        model.stream_created(0x20, 1, true, &origin("cuStreamCreate"));
        let version = model.host_version();
        let access = [Access::new(0x1000, 64, Mode::Write)];
        let copy = model
            .work(
                StreamRef::Handle(0x10),
                Work { origin: origin("cuMemcpyDtoHAsync"), kernel: None, accesses: &access, host: HostEffect::None },
            )
            .expect("not captured");
        assert!(!model.host_has_joined(copy));
        // What the guard lifts at a stream's synchronize before it is told.
        assert!(model.stream_sync_joins(StreamRef::Handle(0x10), copy));
        assert!(!model.stream_sync_joins(StreamRef::Handle(0x20), copy), "another stream");
        assert!(!model.stream_sync_joins(StreamRef::Handle(0x10), Epoch::new(HOST, 1)), "the host's own");
        model.stream_synchronized(StreamRef::Handle(0x20));
        assert!(!model.host_has_joined(copy), "another stream's synchronize");
        model.stream_synchronized(StreamRef::Handle(0x10));
        assert!(model.host_has_joined(copy));
        assert_ne!(model.host_version(), version);
    }

    /// The legacy stream's synchronize waits, as any action on it, for the blocking streams'
    /// work first; a non-blocking stream's work stays in flight.
    #[test]
    fn the_legacy_stream_s_synchronize_joins_the_blocking_streams_too() {
        let model = Model::default();
        model.stream_created(0x10, 1, false, &origin("cuStreamCreate"));
        model.stream_created(0x20, 1, true, &origin("cuStreamCreate"));
        let access = [Access::new(0x1000, 64, Mode::Write)];
        let launch = |on: u64| {
            let work =
                Work { origin: origin("cuLaunchKernel"), kernel: None, accesses: &access, host: HostEffect::None };
            model.work(StreamRef::Handle(on), work).expect("not captured")
        };
        let (blocking, non_blocking) = (launch(0x10), launch(0x20));
        model.stream_synchronized(StreamRef::Legacy { ctx: 1 });
        assert!(model.host_has_joined(blocking));
        assert!(!model.host_has_joined(non_blocking));
    }

    #[test]
    fn a_context_s_synchronize_joins_the_copies_on_its_streams_only() {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &origin("cuStreamCreate"));
        model.stream_created(0x20, 2, true, &origin("cuStreamCreate"));
        let access = [Access::new(0x1000, 64, Mode::Write)];
        let copy = |on: u64| {
            let work =
                Work { origin: origin("cuMemcpyDtoHAsync"), kernel: None, accesses: &access, host: HostEffect::None };
            model.work(StreamRef::Handle(on), work).expect("not captured")
        };
        let (in_one, in_two) = (copy(0x10), copy(0x20));
        assert!(model.context_sync_joins(1, in_one));
        assert!(!model.context_sync_joins(1, in_two), "another context's stream");
        assert!(!model.context_sync_joins(1, Epoch::new(HOST, 1)), "the host's own");
        model.context_synchronized(1);
        assert!(model.host_has_joined(in_one), "what the told synchronize says too");
        assert!(!model.host_has_joined(in_two));
    }

    /// The host read managed bytes guarded for a measured launch before its footprint was
    /// known: a race when the footprint, read later, wrote them; none when it only read them
    /// or touched other bytes.
    #[test]
    fn a_host_access_to_bytes_of_an_unknown_footprint_waits_for_it() {
        use crate::model::footprint::measured::Footprint;
        for (measured, races) in [(Mode::Write, 1), (Mode::Read, 0)] {
            let model = Model::default();
            model.stream_created(0x10, 1, true, &origin("cuStreamCreate"));
            let table = Alloc { base: 0x10_0000, size: 4096, kind: MemoryKind::Managed, ctx: 1 };
            let data = Alloc { base: 0x20_0000, size: 4096, ..table };
            for alloc in [table, data] {
                model.alloc(alloc, None, &origin("cuMemAllocManaged"));
            }
            assert_eq!(model.managed_buffers(8), [(0x20_0000, 0x20_1000), (0x10_0000, 0x10_1000)]);
            let params = [Access::new(0x10_0000, 16, Mode::Read)];
            let work =
                Work { origin: origin("cuLaunchKernel"), kernel: None, accesses: &params, host: HostEffect::None };
            let epoch = model.launch_pending(StreamRef::Handle(0x10), work, 7, None).expect("not captured");
            let op = OpRecord::new(&origin("cuLaunchKernel"), None, epoch);
            let unsure = DeviceBytes { op, mode: Mode::Unknown, lo: 0x20_0000, hi: 0x20_1000 };
            model.host_race(
                unsure,
                HostAccess { origin: origin("host"), mode: Mode::Read, lo: 0x20_0010, hi: 0x20_0011 },
            );
            assert!(model.races().is_empty(), "not before the footprint");
            model.stream_synchronized(StreamRef::Handle(0x10));
            let ranges = [params[0], Access::new(0x20_0000, 1024, measured)];
            model.launch_measured(7, Some(Footprint { ranges: &ranges, covers: &[] }));
            let found: Vec<RaceKind> = model.races().iter().map(|r| r.race.kind).collect();
            assert_eq!(found, vec![RaceKind::HostRace; races], "the launch {measured:?} the bytes");
        }
    }

    #[test]
    fn a_host_race_names_the_copy_the_buffer_and_the_hazard() {
        let model = Model::default();
        let alloc = Alloc { base: 0x1000, size: 4096, kind: MemoryKind::PinnedHost, ctx: 1 };
        model.alloc(alloc, None, &origin("cuMemAllocHost"));
        let access = [Access::new(0x1000, 64, Mode::Write)];
        let work =
            Work { origin: origin("cuMemcpyDtoHAsync"), kernel: None, accesses: &access, host: HostEffect::None };
        let epoch = model.work(StreamRef::Legacy { ctx: 1 }, work).unwrap();
        let op = OpRecord::new(&origin("cuMemcpyDtoHAsync"), None, epoch);
        let copy = DeviceBytes { op, mode: Mode::Write, lo: 0x1000, hi: 0x1040 };
        model.host_race(copy, HostAccess { origin: origin("host"), mode: Mode::Read, lo: 0x1008, hi: 0x1009 });
        let races = model.races();
        assert_eq!(races.len(), 1);
        let race = races[0].race;
        assert_eq!((race.kind, race.hazard), (RaceKind::HostRace, Some(Hazard::ReadAfterWrite)));
        assert_eq!((race.buffer.base, race.buffer.kind), (0x1000, MemoryKind::PinnedHost));
        assert_eq!(race.second.op.epoch.slot, HOST);
        assert_eq!(race.second.action, Action::Access { mode: Mode::Read, lo: 0x1008, hi: 0x1009 });
        let source = DeviceBytes { mode: Mode::Read, ..copy };
        model.host_race(source, HostAccess { origin: origin("host"), mode: Mode::Write, lo: 0x1000, hi: 0x1010 });
        assert_eq!(model.races()[1].race.hazard, Some(Hazard::WriteAfterRead));
    }

    #[test]
    fn a_host_race_where_no_buffer_is_known_names_the_copy_s_bytes() {
        let model = Model::default();
        let op = OpRecord::new(&origin("cuMemcpyDtoHAsync"), None, Epoch::new(1, 1));
        let copy = DeviceBytes { op, mode: Mode::Write, lo: 0x5000, hi: 0x5040 };
        model.host_race(copy, HostAccess { origin: origin("host"), mode: Mode::Read, lo: 0x5010, hi: 0x5011 });
        let buffer = model.races()[0].race.buffer;
        assert_eq!((buffer.base, buffer.size, buffer.kind), (0x5000, 0x40, MemoryKind::PinnedHost));
        assert_eq!(buffer.alloc, op);
    }

    #[test]
    fn a_guard_given_up_is_a_note_once_per_call_site() {
        let model = Model::default();
        let op = OpRecord::new(&origin("cuMemcpyHtoDAsync"), None, Epoch::new(1, 1));
        let copy = DeviceBytes { op, mode: Mode::Read, lo: 0x5000, hi: 0x5040 };
        model.host_guard_gave_up(copy, 0x5000);
        model.host_guard_gave_up(copy, 0x5000);
        let notes = model.notes();
        assert_eq!(notes.len(), 1);
        assert_eq!((notes[0].kind, notes[0].subject, notes[0].count), (NoteKind::HostGuardGaveUp, 0x5000, 2));
        assert!(model.races().is_empty(), "not a race");
    }
}
