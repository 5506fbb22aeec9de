//! Races across processes (`docs/semantics.md#ipc`): memory shared through CUDA IPC has its
//! accesses exchanged with the other processes that share it, and an IPC event recorded in
//! one process orders, in another, what waits on the event opened from its handle.

use crate::model::buffers::Found;
use crate::model::clock::{Epoch, Slot, VectorClock, HOST};
use crate::model::events::EventState;
use crate::model::op::{Mode, OpRecord, Origin};
use crate::model::peers::{Exchange, PeerEpoch, PeerStream, ShareKey, Shared, SharedAccess};
use crate::model::race::NoteKind;
use crate::model::residue::DENSE;
use crate::model::shadow::Shadow;
use crate::model::streams::SlotOwner;
use crate::model::Model;

impl Model {
    /// From now on, shared memory is exchanged with other processes through `exchange`.
    pub fn exchange_through(&self, exchange: Box<dyn Exchange>) {
        self.peers.install(exchange);
    }

    /// The slot of this process's clocks that stands for slot `slot` of process `pid`; named
    /// after `stream` from `time` on, when its owner is known.
    pub fn peer_slot(&self, pid: u32, slot: Slot, stream: Option<(&PeerStream, u32)>) -> Slot {
        let unnamed = || PeerStream {
            pid,
            slot,
            label: format!("a stream (slot {slot})"),
            handle: 0,
            kind: "unknown".into(),
            ctx: 0,
        };
        let first = stream.map_or_else(unnamed, |(s, _)| s.clone());
        let (local, made) = self.peers.slot(pid, slot, || self.streams.slots.allocate_peer(SlotOwner::Peer(first)));
        if let (false, Some((stream, time))) = (made, stream) {
            self.streams.slots.rename(local, time, SlotOwner::Peer(stream.clone()));
        }
        local
    }

    /// Epochs of any process as one clock of this one: its own in their slots, other
    /// processes' in the slots that stand for theirs.
    pub fn peer_clock(&self, epochs: &[PeerEpoch]) -> VectorClock {
        let me = std::process::id();
        let mut clock = VectorClock::new();
        for &(pid, slot, time) in epochs {
            let slot = if pid == me { slot } else { self.peer_slot(pid, slot, None) };
            if time > clock.get(slot) {
                clock.set(slot, time);
            }
        }
        clock
    }

    /// `clock` in the terms every process reads; `peers_only`: only what it knows of other
    /// processes (what an access must carry so that they can tell it followed their work).
    pub fn shared_clock(&self, clock: &VectorClock, peers_only: bool) -> Vec<PeerEpoch> {
        let me = std::process::id();
        let entries = clock.entries().into_iter();
        entries
            .filter_map(|(slot, time)| match self.peers.origin(slot) {
                Some((pid, theirs)) => Some((pid, theirs, time)),
                None => (!peers_only).then_some((me, slot, time)),
            })
            .collect()
    }

    /// The clock of the last record of `event` in the terms every process reads; None while
    /// it is not recorded (or recorded in a capture).
    pub fn event_shared_clock(&self, event: u64) -> Option<Vec<PeerEpoch>> {
        let clock = self.events.with(event, |e| match &*e.lock() {
            EventState::Recorded(clock) => Some(clock.clone()),
            _ => None,
        })?;
        Some(self.shared_clock(&clock, false))
    }

    /// An event opened from another process's IPC handle: its last record there, whose
    /// clock that process published, is its record here.
    pub fn event_recorded_by_peer(&self, event: u64, epochs: &[PeerEpoch]) {
        let clock = self.peer_clock(epochs);
        self.events.with(event, |e| *e.lock() = EventState::Recorded(clock));
    }

    /// What this process's host has waited for of its own streams, in the terms every
    /// process reads: published, so that the others stop checking against work that was over
    /// before they issued theirs (a host told through a pipe or a shared counter, which
    /// streamsan does not see, that the work it shares is done).
    pub fn host_shared_clock(&self) -> Vec<PeerEpoch> {
        let me = std::process::id();
        let entries = self.host.snapshot().entries().into_iter();
        entries
            .filter(|&(slot, _)| slot != HOST && !self.peers.is_peer(slot))
            .map(|(slot, time)| (me, slot, time))
            .collect()
    }

    /// What another process's host had waited for at `at` ([`Model::host_shared_clock`],
    /// [`crate::model::peers::now`]).
    pub fn completed_by_peer(&self, epochs: &[PeerEpoch], at: u64) {
        self.peers.complete(&self.peer_clock(epochs), at);
    }

    /// Memory or an event (`subject`) opened from an IPC handle that no process of the run
    /// exported: its exporter's work is not seen, as the note says.
    pub fn opened_unseen(&self, subject: u64, origin: &Origin) {
        let epoch = Epoch::new(HOST, self.host.get(HOST));
        self.notes.add(NoteKind::IpcImport, OpRecord::new(origin, None, epoch), subject);
    }

    /// Marks `size` bytes at `addr` as memory shared with other processes under `key`, and
    /// publishes what this process did to them so far (an exporter's work before the export).
    pub fn share(&self, addr: u64, size: u64, key: ShareKey) {
        let buffer = self.buffers.with(addr, |found| match found {
            Found::Live(buffer) => Some(buffer.clone()),
            _ => None,
        });
        let Some(buffer) = buffer else { return };
        let size = size.min(buffer.end() - addr);
        let mut shared = Shared { key, start: addr, size, seen: 0 };
        let mut state = buffer.lock();
        // Exported again (PyTorch exports a segment for each tensor it sends from it).
        if state.shared.as_ref().is_some_and(|known| known.key == key) {
            return;
        }
        let before: Vec<_> = state.shadow.records().iter().filter(|r| r.overlaps(addr, addr + size)).copied().collect();
        for record in before {
            let access = (record.lo, record.hi, record.mode);
            self.exchange_access(&mut shared, &mut state.shadow, access, record.op, None);
        }
        state.shared = Some(Box::new(shared));
    }

    /// Publishes this process's access to `lo..hi` of shared memory (`issued`: its
    /// operation's clock, for what it knew of other processes, and when it was issued; None
    /// for work before the memory was shared), and records in `shadow` the accesses other
    /// processes published since this process last looked. Theirs are checked there like any
    /// earlier access; a race they complete is theirs to report.
    pub(super) fn exchange_access(
        &self,
        shared: &mut Shared,
        shadow: &mut Shadow,
        (lo, hi, mode): (u64, u64, Mode),
        op: OpRecord,
        issued: Option<(&VectorClock, u64)>,
    ) {
        let Some(exchange) = self.peers.exchange() else { return };
        let (lo, hi) = (lo.max(shared.start), hi.min(shared.start + shared.size).max(lo));
        let knew = issued.map(|(clock, _)| self.shared_clock(clock, true)).unwrap_or_default();
        let issued_at = issued.map_or(0, |(_, at)| at);
        let mine = SharedAccess { lo: lo - shared.start, hi: hi - shared.start, mode, op, knew, issued_at };
        for theirs in exchange.access(self, shared.key, &mut shared.seen, &mine) {
            let epoch = theirs.op.epoch;
            self.peers.remember(epoch, self.peer_clock(&theirs.knew), theirs.issued_at);
            // Their own clock is not known here: it supersedes only their slot's earlier
            // records.
            let mut own = VectorClock::new();
            own.set(epoch.slot, epoch.time);
            let (lo, hi) = (shared.start + theirs.lo, shared.start + theirs.hi);
            shadow.record(lo, hi, DENSE, theirs.mode, theirs.op, &own);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::model::buffers::MemoryKind;
    use crate::model::clock::Epoch;
    use crate::model::op::{Access, HostEffect, Mode, OpRecord, Origin, StackId, ThreadId};
    use crate::model::peers::{Exchange, PeerStream, ShareKey, SharedAccess};
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, Model, Work};

    /// Another process: no process has this id but the first.
    const PEER: u32 = 1;

    /// An exchange whose other process wrote `theirs`; what this process published is kept.
    #[derive(Clone, Default)]
    struct Scripted {
        theirs: Arc<Mutex<Vec<SharedAccess>>>,
        published: Arc<Mutex<Vec<SharedAccess>>>,
    }

    impl Exchange for Scripted {
        fn access(&self, _: &Model, _: ShareKey, seen: &mut usize, access: &SharedAccess) -> Vec<SharedAccess> {
            self.published.lock().unwrap().push(access.clone());
            let theirs = self.theirs.lock().unwrap();
            let new = theirs[*seen..].to_vec();
            *seen = theirs.len();
            new
        }
    }

    fn origin(api: &'static str) -> Origin {
        Origin::test(api, 1)
    }

    /// A model sharing its 64-byte buffer at 0x1000 with process [`PEER`], which wrote all of
    /// it on its slot 3 at time 5.
    fn shared_with_a_writer() -> (Model, Scripted) {
        let model = Model::default();
        let exchange = Scripted::default();
        model.exchange_through(Box::new(exchange.clone()));
        model.alloc(
            Alloc { base: 0x1000, size: 64, kind: MemoryKind::Imported, ctx: 1 },
            None,
            &origin("cuIpcOpenMemHandle"),
        );
        model.stream_created(0x10, 1, true, &origin("cuStreamCreate"));
        let stream = PeerStream {
            pid: PEER,
            slot: 3,
            label: "stream 0x99".into(),
            handle: 0x99,
            kind: "non-blocking".into(),
            ctx: 7,
        };
        let slot = model.peer_slot(PEER, 3, Some((&stream, 5)));
        let op = OpRecord {
            epoch: Epoch::new(slot, 5),
            api: "cuMemsetD8Async",
            kernel: None,
            thread: ThreadId(1),
            site: StackId(0),
        };
        exchange.theirs.lock().unwrap().push(SharedAccess {
            lo: 0,
            hi: 64,
            mode: Mode::Write,
            op,
            knew: Vec::new(),
            issued_at: 1,
        });
        model.share(0x1000, 64, ShareKey { pid: PEER, addr: 0x9000 });
        (model, exchange)
    }

    fn read(model: &Model) {
        let read = [Access::new(0x1000, 8, Mode::Read)];
        let work =
            Work { origin: origin("cuMemcpyDtoDAsync_v2"), kernel: None, accesses: &read, host: HostEffect::None };
        model.work(StreamRef::Handle(0x10), work);
    }

    #[test]
    fn a_read_unordered_with_another_process_s_write_races_with_it() {
        let (model, _) = shared_with_a_writer();
        read(&model);
        let races = model.races();
        assert_eq!(races.len(), 1);
        assert_eq!(races[0].race.first.op.api, "cuMemsetD8Async");
        assert!(
            matches!(model.slot_owner(races[0].race.first.op.epoch), crate::model::streams::SlotOwner::Peer(p) if p.handle == 0x99)
        );
    }

    #[test]
    fn a_wait_on_the_opened_event_orders_the_read_and_is_published_with_it() {
        let (model, exchange) = shared_with_a_writer();
        model.event_recorded_by_peer(0xe, &[(PEER, 3, 5)]);
        model.stream_wait_event(StreamRef::Handle(0x10), 0xe, &origin("cuStreamWaitEvent"));
        read(&model);
        assert!(model.races().is_empty());
        let published = exchange.published.lock().unwrap();
        assert_eq!(published.last().unwrap().knew, [(PEER, 3, 5)], "what the read knew of the writer");
    }

    #[test]
    fn a_write_the_other_process_s_host_waited_for_before_the_read_is_no_race() {
        let (model, _) = shared_with_a_writer();
        model.completed_by_peer(&[(PEER, 3, 5)], 2);
        read(&model);
        assert!(model.races().is_empty());
    }

    #[test]
    fn a_free_is_not_checked_against_other_processes() {
        let (model, _) = shared_with_a_writer();
        read(&model);
        model.free(0x1000, crate::model::FreeOn::Synchronous { ctx: 1 }, &origin("cuIpcCloseMemHandle"));
        assert_eq!(model.races().len(), 1, "the read's race only");
    }
}
