//! The happens-before model: what CUDA orders with what, and the races it leaves open.
//!
//! The shim tells the model, call by call, what the program did: an operation issued on a
//! stream (with the memory it touches), an allocation or a free, an event recorded or waited
//! on, a synchronization, a capture, a graph launch. The model keeps a vector clock per
//! stream and one for the host ([`streams`]), an access history per buffer ([`buffers`],
//! [`shadow`]) and the captured graphs ([`capture`]), and decides at each operation whether
//! it is ordered after everything it must follow. What it finds goes to [`race::Races`],
//! deduplicated by call sites, and to the [`Sink`] as soon as it is new.
//!
//! The rules are those of `SEMANTICS.md`; each entry point below names the rule it applies.
//! Locks: at most one stream lock is held at a time; under a stream lock the model may take
//! a buffer's or an event's lock, never the reverse.

pub mod buffers;
pub mod capture;
pub mod clock;
pub mod direction;
pub mod events;
pub mod host_access;
pub mod lock;
pub mod op;
pub mod race;
pub mod shadow;
pub mod streams;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::hash::{fast_map, FastMap};

use buffers::{Buffer, BufferMap, Found, MemoryKind};
use capture::{Capture, CaptureLane, Exec, ExecState, Graphs, HostCallback, Node, NodeKind};
use clock::{Epoch, VectorClock};
use direction::Directions;
use events::{EventState, Events};
use op::{Access, HostEffect, KernelId, Mode, OpRecord, Origin};
use race::{Action, BufferFacts, Hazard, Note, NoteKind, Notes, Race, RaceEntry, RaceKind, Races, Side};
use streams::{Host, SlotOwner, Stream, StreamInfo, StreamRef, StreamState, Streams};

/// Receives each new race as the model finds it.
pub trait Sink: Send + Sync {
    fn race(&self, entry: &RaceEntry);
}

/// A kernel launch, copy or memset.
#[derive(Clone, Copy, Debug)]
pub struct Work<'a> {
    pub origin: Origin,
    pub kernel: Option<KernelId>,
    pub accesses: &'a [Access],
    pub host: HostEffect,
}

/// A new allocation.
#[derive(Clone, Copy, Debug)]
pub struct Alloc {
    pub base: u64,
    pub size: u64,
    pub kind: MemoryKind,
    pub ctx: u64,
}

/// How a free is ordered.
#[derive(Clone, Copy, Debug)]
pub enum FreeOn {
    /// `cuMemFreeAsync`: an operation on a stream.
    Stream(StreamRef),
    /// `cuMemFree`, `cuMemFreeHost`, ...: synchronous and device-wide.
    Synchronous { ctx: u64 },
}

thread_local! {
    /// A clock to gather into, reused so that the launch path does not allocate.
    static SCRATCH: Cell<Option<VectorClock>> = const { Cell::new(None) };
}

/// A cleared clock: the thread's reused one, or a new one once the thread's storage is gone
/// (a program's exit handlers may still call the driver).
fn scratch() -> VectorClock {
    let mut clock = SCRATCH.try_with(|s| s.take()).ok().flatten().unwrap_or_default();
    clock.clear();
    clock
}

fn return_scratch(clock: VectorClock) {
    let _ = SCRATCH.try_with(|s| s.set(Some(clock)));
}

type Describe = dyn Fn(u64) -> Option<StreamInfo> + Send + Sync;

pub struct Model {
    streams: Streams,
    host: Host,
    buffers: BufferMap,
    events: Events,
    graphs: Graphs,
    /// The clock of the last `cuStreamWriteValue` to each address.
    values: FastMap<u64, VectorClock>,
    kernels: Mutex<(HashMap<String, u32>, Vec<String>)>,
    directions: Directions,
    races: Races,
    notes: Notes,
    next_buffer: AtomicU64,
    describe: Box<Describe>,
    sink: Option<Box<dyn Sink>>,
}

impl Default for Model {
    fn default() -> Self {
        Model::new(Box::new(|_| None), None)
    }
}

impl Model {
    /// `describe` tells the context and flags of a stream handle the model never saw
    /// created; `sink` hears of each new race.
    pub fn new(describe: Box<Describe>, sink: Option<Box<dyn Sink>>) -> Model {
        Model {
            streams: Streams::new(),
            host: Host::new(),
            buffers: BufferMap::new(),
            events: Events::default(),
            graphs: Graphs::default(),
            values: fast_map(),
            kernels: Mutex::new((HashMap::new(), Vec::new())),
            directions: Directions::default(),
            races: Races::default(),
            notes: Notes::default(),
            next_buffer: AtomicU64::new(1),
            describe,
            sink,
        }
    }

    // ---- Names and lookups --------------------------------------------------------------

    /// The id of a kernel name, interned on first use.
    pub fn kernel_id(&self, name: &str) -> KernelId {
        let mut k = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = k.0.get(name) {
            return KernelId(id);
        }
        let id = k.1.len() as u32;
        k.1.push(name.to_string());
        k.0.insert(name.to_string(), id);
        KernelId(id)
    }

    pub fn kernel_name(&self, id: KernelId) -> String {
        let k = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        k.1.get(id.0 as usize).cloned().unwrap_or_default()
    }

    /// Who owns a slot (for reports).
    pub fn slot_owner(&self, slot: clock::Slot) -> SlotOwner {
        self.streams.slots.owner(slot)
    }

    /// Whether `addr` could be in a buffer: a cheap filter for a kernel's parameter words.
    #[inline]
    pub fn may_be_buffer(&self, addr: u64) -> bool {
        self.buffers.in_range(addr)
    }

    /// The kind of live memory at `addr`.
    pub fn memory_kind(&self, addr: u64) -> Option<MemoryKind> {
        match self.buffers.find(addr) {
            Found::Live(b) => Some(b.kind),
            _ => None,
        }
    }

    /// Whether `addr` is in a buffer, live or freed (a kernel word worth recording).
    pub fn is_tracked(&self, addr: u64) -> bool {
        !matches!(self.buffers.find(addr), Found::Nothing)
    }

    pub fn races(&self) -> Vec<RaceEntry> {
        self.races.entries()
    }

    /// Forgets the races and notes found so far, keeping what is ordered with what: a forked
    /// child reports what it finds itself, not its parent's findings again.
    pub fn forget_findings(&self) {
        self.races.clear();
        self.notes.clear();
    }

    pub fn notes(&self) -> Vec<Note> {
        self.notes.entries()
    }

    fn stream(&self, key: StreamRef) -> Arc<Stream> {
        self.streams.resolve(key, &*self.describe)
    }

    fn publish(&self, found: Vec<Race>) {
        for race in found {
            if self.races.add(race) {
                if let Some(sink) = &self.sink {
                    sink.race(&RaceEntry { race, count: 1 });
                }
            }
        }
    }

    // ---- The issue rule -----------------------------------------------------------------

    /// Issues an operation on `stream` (SEMANTICS.md, "Issue rule" and "Default streams"):
    /// `C_S ⊔= H`; for the legacy stream, `C_L ⊔=` every blocking stream of the context; for
    /// a blocking stream, `C_S ⊔= C_L`; then `C_S[S] += 1`. Returns the stream's locked
    /// state and the operation's epoch. Clocks of other streams are gathered before the
    /// stream's own lock is taken.
    fn issue<'s>(&self, stream: &'s Stream) -> (lock::Guard<'s, StreamState>, Epoch) {
        // Only what changed since this stream last looked is joined; on the common path (a
        // non-blocking stream, the host unchanged) nothing is.
        let host_version = self.host.version.load(Ordering::Acquire);
        let host = (stream.host_seen.load(Ordering::Relaxed) != host_version).then(|| self.host.current());
        let mut incoming = None;
        let mut legacy_version = None;
        // The legacy stream joins the blocking streams that changed, if any did: their clocks
        // are gathered with the context's member list held, and marked joined once in the
        // legacy clock.
        let context = match stream.kind {
            streams::StreamKind::LegacyDefault if stream.take_blocking_changes() => {
                stream.context.get().and_then(|c| c.upgrade()).or_else(|| Some(self.streams.context(stream.ctx)))
            }
            _ => None,
        };
        let members = context.as_ref().map(|c| c.members_guard());
        let mut joined = Vec::new();
        if let Some(members) = &members {
            let mut clock = scratch();
            streams::Context::join_blocking_into(members, &mut clock, &mut joined);
            incoming = Some(clock);
        } else if let Some(legacy) = &stream.legacy {
            let version = legacy.version.load(Ordering::Acquire);
            if stream.legacy_seen.load(Ordering::Relaxed) != version {
                let mut clock = scratch();
                legacy.join_into(&mut clock);
                incoming = Some(clock);
                legacy_version = Some(version);
            }
        }
        let mut state = stream.lock();
        if let Some(host) = &host {
            state.clock.join_host(host);
            stream.host_seen.store(host_version, Ordering::Relaxed);
        }
        if let Some(clock) = incoming {
            state.clock.join(&clock);
            return_scratch(clock);
        }
        if let Some(version) = legacy_version {
            stream.legacy_seen.store(version, Ordering::Relaxed);
        }
        if let Some(members) = &members {
            for &(i, version) in &joined {
                members[i].joined_by_legacy.store(version, Ordering::Relaxed);
            }
        }
        let epoch = state.clock.tick(stream.slot);
        stream.changed();
        (state, epoch)
    }

    /// Issues an operation that touches no memory; returns its epoch.
    fn issue_only(&self, stream: &Stream) -> Epoch {
        let (state, epoch) = self.issue(stream);
        drop(state);
        epoch
    }

    /// `H ⊔= C_S`.
    fn host_joins(&self, stream: &Stream) {
        let mut clock = scratch();
        stream.join_into(&mut clock);
        self.host.join(&clock);
        return_scratch(clock);
    }

    // ---- Streams and contexts -----------------------------------------------------------

    pub fn stream_created(&self, handle: u64, ctx: u64, non_blocking: bool, origin: &Origin) {
        self.streams.created(handle, ctx, non_blocking, origin.site, origin.thread);
    }

    /// `cuStreamDestroy`: the handle is gone; pending work still completes (a note).
    pub fn stream_destroyed(&self, handle: u64, origin: &Origin) {
        let Some(stream) = self.streams.destroyed(handle) else { return };
        let last = stream.lock().clock.get(stream.slot);
        if last > self.host.get(stream.slot) {
            let op = OpRecord::new(origin, None, Epoch::new(stream.slot, last));
            self.notes.add(NoteKind::DestroyedWhilePending, op, handle);
        }
    }

    /// A context destroyed or reset: its work is done, its streams and memory are gone.
    pub fn context_destroyed(&self, ctx: u64) {
        for stream in self.streams.remove_context(ctx) {
            self.host_joins(&stream);
        }
        self.buffers.remove_context(ctx);
    }

    // ---- Work -----------------------------------------------------------------------------

    /// A kernel launch, copy or memset on `stream`: each access is checked against the
    /// buffer's allocation and history, then recorded. While the stream captures, the work
    /// becomes a node instead. Returns the operation's epoch (None for a node).
    pub fn work(&self, stream: StreamRef, work: Work<'_>) -> Option<Epoch> {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Work { accesses: work.accesses.to_vec() }, &work.origin, work.kernel) {
            return None;
        }
        if work.host == HostEffect::WaitsForEarlierWork {
            self.host_joins(&stream);
        }
        let mut found = Vec::new();
        let (state, epoch) = self.issue(&stream);
        let op = OpRecord::new(&work.origin, work.kernel, epoch);
        for access in work.accesses {
            self.access(access, &state.clock, op, &mut found);
        }
        drop(state);
        if work.host == HostEffect::WaitsForOperation {
            self.host_joins(&stream);
        }
        self.publish(found);
        Some(epoch)
    }

    /// Checks and records one access by `op`, whose clock is `clock`.
    fn access(&self, access: &Access, clock: &VectorClock, op: OpRecord, found: &mut Vec<Race>) {
        let end = access.addr.saturating_add(access.len.max(1));
        let mut addr = access.addr;
        // An access may span adjacent buffers (a copy over two): take each in turn.
        for _ in 0..8 {
            let next = self.buffers.with(addr, |buffer_at| match buffer_at {
                Found::Live(buffer) => {
                    let (lo, hi) = (addr, end.min(buffer.end()));
                    let mut state = buffer.lock();
                    // Host and managed memory may be written by the host, unseen: never fresh.
                    let device_only = !buffer.kind.is_host() && buffer.kind != MemoryKind::Managed;
                    let mode = self.directions.resolve(access.mode, op.kernel, access.slot, || device_only && state.shadow.untouched(lo, hi));
                    let this = Side { op, action: Action::Access { mode, lo, hi } };
                    let facts = || BufferFacts::of(buffer);
                    if !buffer.alloc.epoch.happens_before(clock) {
                        let alloc = Side { op: buffer.alloc, action: Action::Alloc };
                        found.push(Race { kind: RaceKind::UseBeforeAlloc, hazard: None, buffer: facts(), first: alloc, second: this });
                    }
                    for earlier in state.shadow.conflicts(lo, hi, mode, op.epoch, clock) {
                        let first = Side { op: earlier.op, action: Action::Access { mode: earlier.mode, lo: earlier.lo, hi: earlier.hi } };
                        let hazard = Hazard::between(earlier.mode, mode);
                        found.push(Race { kind: RaceKind::CrossStream, hazard: Some(hazard), buffer: facts(), first, second: this });
                    }
                    state.shadow.record(lo, hi, mode, op, clock);
                    hi
                }
                Found::Freed(buffer) => {
                    if access.exact {
                        let hi = end.min(buffer.end());
                        let this = Side { op, action: Action::Access { mode: access.mode, lo: addr, hi } };
                        if let Some(free) = buffer.lock().freed {
                            let first = Side { op: free, action: Action::Free };
                            found.push(Race { kind: RaceKind::UseAfterFree, hazard: None, buffer: BufferFacts::of(buffer), first, second: this });
                        }
                    }
                    buffer.end()
                }
                Found::Nothing => end,
            });
            if next >= end {
                return;
            }
            addr = next;
        }
    }

    // ---- Allocation ----------------------------------------------------------------------

    /// An allocation: synchronous (`on: None`; its epoch is the host's) or stream-ordered
    /// (an operation on the stream, which every access must follow).
    pub fn alloc(&self, alloc: Alloc, on: Option<StreamRef>, origin: &Origin) {
        let epoch = match on {
            None => self.host.tick(),
            Some(key) => {
                let stream = self.stream(key);
                let node = || NodeKind::Alloc { base: alloc.base, size: alloc.size, ctx: alloc.ctx };
                if self.capture_node(&stream, node, origin, None) {
                    return;
                }
                self.issue_only(&stream)
            }
        };
        self.register(alloc, OpRecord::new(origin, None, epoch));
    }

    fn register(&self, alloc: Alloc, op: OpRecord) {
        let id = self.next_buffer.fetch_add(1, Ordering::Relaxed);
        let buffer = Buffer::new(id, alloc.base, alloc.size, alloc.kind, alloc.ctx, op);
        self.buffers.insert(Arc::new(buffer));
    }

    /// A free of the buffer at `base` (SEMANTICS.md: every earlier access must happen
    /// before it, or it is a free-race).
    pub fn free(&self, base: u64, on: FreeOn, origin: &Origin) {
        let mut found = Vec::new();
        match on {
            FreeOn::Stream(key) => {
                let stream = self.stream(key);
                if self.capture_node(&stream, || NodeKind::Free { base }, origin, None) {
                    return;
                }
                let (state, epoch) = self.issue(&stream);
                self.release(base, OpRecord::new(origin, None, epoch), &state.clock, &mut found);
            }
            FreeOn::Synchronous { ctx } => {
                // Device-wide: the host first waits for every stream of the context.
                let ctx = self.buffers.live_at(base).map_or(ctx, |b| b.ctx);
                for stream in self.streams.of_context(ctx) {
                    self.host_joins(&stream);
                }
                let epoch = self.host.tick();
                let clock = self.host.snapshot();
                self.release(base, OpRecord::new(origin, None, epoch), &clock, &mut found);
            }
        }
        self.publish(found);
    }

    /// Frees the buffer at `base` by `op` (clock `clock`), checking what it must follow.
    fn release(&self, base: u64, op: OpRecord, clock: &VectorClock, found: &mut Vec<Race>) {
        let Some(buffer) = self.buffers.live_at(base) else { return };
        let facts = BufferFacts::of(&buffer);
        let free = Side { op, action: Action::Free };
        if !buffer.alloc.epoch.happens_before(clock) {
            let alloc = Side { op: buffer.alloc, action: Action::Alloc };
            found.push(Race { kind: RaceKind::UseBeforeAlloc, hazard: None, buffer: facts, first: alloc, second: free });
        }
        let mut state = buffer.lock();
        for earlier in state.shadow.unordered(clock) {
            let first = Side { op: earlier.op, action: Action::Access { mode: earlier.mode, lo: earlier.lo, hi: earlier.hi } };
            found.push(Race { kind: RaceKind::FreeRace, hazard: None, buffer: facts, first, second: free });
        }
        buffer.mark_freed(&mut state, op);
        state.shadow.clear();
        drop(state);
        self.buffers.quarantine(&buffer);
    }

    // ---- Events and synchronization -------------------------------------------------------

    /// `cuEventRecord(E, S)`: `E.clock := C_S`. In a capture, E stands for the stream's
    /// frontier (and, recorded external, becomes a node).
    pub fn event_record(&self, event: u64, stream: StreamRef, external: bool, origin: &Origin) {
        let stream = self.stream(stream);
        if stream.capturing.load(Ordering::Acquire) {
            let capture = {
                let state = stream.lock();
                state.capture.as_ref().map(|lane| (lane.capture.clone(), lane.frontier.clone()))
            };
            if let Some((capture, nodes)) = capture {
                if external {
                    self.capture_node(&stream, || NodeKind::RecordEvent { event }, origin, None);
                }
                self.events.with(event, |e| *e.lock() = EventState::Captured { capture, nodes });
                return;
            }
        }
        let (state, _) = self.issue(&stream);
        self.events.with(event, |e| match &mut *e.lock() {
            EventState::Recorded(clock) => clock.assign(&state.clock),
            other => *other = EventState::Recorded(state.clock.clone()),
        });
    }

    /// `cuStreamWaitEvent(S, E)`: `C_S ⊔= E.clock`; a no-op (and a note) if E was never
    /// recorded; in a capture, S joins the capture (fork) or merges E's nodes (join).
    pub fn stream_wait_event(&self, stream: StreamRef, event: u64, origin: &Origin) {
        let stream = self.stream(stream);
        // A recorded clock is copied into the thread's scratch clock (no allocation; the
        // state keeps an empty placeholder), and the event unlocked before the stream is
        // locked: a record takes the two locks the other way round.
        let mut recorded = scratch();
        let state = self.events.with(event, |e| match &*e.lock() {
            EventState::Recorded(clock) => {
                recorded.assign(clock);
                EventState::Recorded(VectorClock::new())
            }
            other => other.clone(),
        });
        match state {
            EventState::Unrecorded => {
                let epoch = self.issue_only(&stream);
                self.notes.add(NoteKind::WaitOnUnrecordedEvent, OpRecord::new(origin, None, epoch), event);
            }
            EventState::Captured { capture, nodes } => self.join_capture(&stream, capture, nodes),
            EventState::Recorded(_) => {
                if !self.capture_node(&stream, || NodeKind::WaitEvent { event }, origin, None) {
                    let (mut state, _) = self.issue(&stream);
                    state.clock.join(&recorded);
                    stream.changed();
                }
            }
        }
        return_scratch(recorded);
    }

    /// `cuEventSynchronize(E)`, or `cuEventQuery(E)` returning success: `H ⊔= E.clock`.
    pub fn event_synchronized(&self, event: u64) {
        self.events.with(event, |e| {
            if let EventState::Recorded(clock) = &*e.lock() {
                self.host.join(clock);
            }
        });
    }

    pub fn event_destroyed(&self, event: u64) {
        self.events.remove(event);
    }

    /// `cuStreamSynchronize(S)`, or `cuStreamQuery(S)` returning success: `H ⊔= C_S`.
    pub fn stream_synchronized(&self, stream: StreamRef) {
        let stream = self.stream(stream);
        self.host_joins(&stream);
    }

    /// `cuCtxSynchronize`: `H ⊔= C_S` for every stream of the context.
    pub fn context_synchronized(&self, ctx: u64) {
        for stream in self.streams.of_context(ctx) {
            self.host_joins(&stream);
        }
        self.streams.context(ctx).prune(&self.host.snapshot());
    }

    /// `cuLaunchHostFunc`, `cuStreamAddCallback`: an operation on the stream with no device
    /// access. The returned callback carries its clock; call [`Model::host_func_ran`] when
    /// the function runs.
    pub fn host_func(&self, stream: StreamRef, origin: &Origin) -> Arc<HostCallback> {
        let stream = self.stream(stream);
        let callback = Arc::new(HostCallback::default());
        if self.capture_node(&stream, || NodeKind::HostFunc(callback.clone()), origin, None) {
            callback.mark_captured();
            return callback;
        }
        let (state, _) = self.issue(&stream);
        callback.set(&state.clock);
        callback
    }

    /// A host function ran: the host is ordered after what preceded it on its stream.
    pub fn host_func_ran(&self, callback: &HostCallback) {
        self.host.join(&callback.clock());
    }

    /// `cuStreamWriteValue32/64`: a write of `len` bytes at `addr`, remembered for waits.
    pub fn write_value(&self, stream: StreamRef, addr: u64, len: u64, origin: &Origin) {
        let stream = self.stream(stream);
        let access = [Access::new(addr, len, Mode::Write)];
        if self.capture_node(&stream, || NodeKind::Work { accesses: access.to_vec() }, origin, None) {
            return;
        }
        let mut found = Vec::new();
        let (state, epoch) = self.issue(&stream);
        self.access(&access[0], &state.clock, OpRecord::new(origin, None, epoch), &mut found);
        self.values.insert(addr, state.clock.clone());
        drop(state);
        self.publish(found);
    }

    /// `cuStreamWaitValue32/64`: `C_S ⊔=` the clock of the last write to `addr`.
    pub fn wait_value(&self, stream: StreamRef, addr: u64, origin: &Origin) {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Empty, origin, None) {
            return;
        }
        let written = self.values.get(&addr).map(|c| c.clone());
        let (mut state, _) = self.issue(&stream);
        if let Some(clock) = written {
            state.clock.join(&clock);
            stream.changed();
        }
    }

    // ---- Capture and graphs ----------------------------------------------------------------

    /// If `stream` is capturing, appends a node for the operation and returns true.
    fn capture_node(&self, stream: &Stream, kind: impl FnOnce() -> NodeKind, origin: &Origin, kernel: Option<KernelId>) -> bool {
        if !stream.capturing.load(Ordering::Acquire) {
            return false;
        }
        let mut state = stream.lock();
        let Some(lane) = state.capture.as_mut() else { return false };
        let node = Node { lane: lane.lane, deps: std::mem::take(&mut lane.frontier), kind: kind(), origin: *origin, kernel };
        let id = lane.capture.push(node);
        lane.frontier = vec![id];
        true
    }

    /// `cuStreamBeginCapture(S)`: what S issues from now on is recorded, not executed.
    pub fn capture_begin(&self, stream: StreamRef) {
        let stream = self.stream(stream);
        let capture = Capture::new();
        let lane = capture.join(&stream);
        stream.lock().capture = Some(CaptureLane { capture, lane, frontier: Vec::new() });
        stream.capturing.store(true, Ordering::Release);
    }

    /// A stream waits on an event recorded in a capture: it joins that capture, or, already
    /// in it, adds the event's nodes to its frontier.
    fn join_capture(&self, stream: &Arc<Stream>, capture: Arc<Capture>, nodes: Vec<usize>) {
        let mut state = stream.lock();
        match state.capture.as_mut() {
            Some(lane) if Arc::ptr_eq(&lane.capture, &capture) => {
                for n in nodes {
                    if !lane.frontier.contains(&n) {
                        lane.frontier.push(n);
                    }
                }
            }
            Some(_) => {}
            None => {
                let lane = capture.join(stream);
                state.capture = Some(CaptureLane { capture, lane, frontier: nodes });
                stream.capturing.store(true, Ordering::Release);
            }
        }
    }

    /// `cuStreamEndCapture(S)`: the capture is over for every stream that took part;
    /// `graph` is the graph it made, if it succeeded.
    pub fn capture_end(&self, stream: StreamRef, graph: Option<u64>) {
        let stream = self.stream(stream);
        let Some(lane) = stream.lock().capture.take() else { return };
        stream.capturing.store(false, Ordering::Release);
        for member in lane.capture.members() {
            let mut state = member.lock();
            if state.capture.as_ref().is_some_and(|l| Arc::ptr_eq(&l.capture, &lane.capture)) {
                state.capture = None;
                member.capturing.store(false, Ordering::Release);
            }
        }
        let captured = lane.capture.finish();
        if let Some(graph) = graph {
            self.graphs.graphs.insert(graph, Arc::new(captured));
        }
    }

    /// `cuGraphInstantiate*`: an executable graph of a graph streamsan followed, if it did.
    pub fn graph_instantiated(&self, exec: u64, graph: u64) {
        match self.graphs.graphs.get(&graph) {
            Some(g) => {
                let exec_graph = Exec { graph: g.clone(), state: Mutex::new(ExecState::default()) };
                self.graphs.execs.insert(exec, Arc::new(exec_graph));
            }
            None => {
                self.graphs.execs.remove(&exec);
            }
        }
    }

    pub fn graph_destroyed(&self, graph: u64) {
        self.graphs.graphs.remove(&graph);
    }

    pub fn exec_destroyed(&self, exec: u64) {
        self.graphs.execs.remove(&exec);
    }

    /// `cuGraphLaunch(G, S)`: every node is ordered after the work issued on S before the
    /// launch and after its predecessors (and launches of one executable graph after each
    /// other); work issued on S afterwards is ordered after every node. A graph streamsan
    /// did not follow runs unchecked, with a note.
    pub fn graph_launch(&self, exec: u64, stream: StreamRef, origin: &Origin) {
        let stream = self.stream(stream);
        let exec_graph = self.graphs.execs.get(&exec).map(|e| e.clone());
        if self.capture_node(&stream, || NodeKind::Empty, origin, None) {
            return;
        }
        let (state, epoch) = self.issue(&stream);
        let Some(exec_graph) = exec_graph else {
            drop(state);
            self.notes.add(NoteKind::GraphNotFollowed, OpRecord::new(origin, None, epoch), exec);
            return;
        };
        let mut base = state.clock.clone();
        drop(state);
        let graph = &exec_graph.graph;
        let mut exec_state = exec_graph.state.lock().unwrap_or_else(|e| e.into_inner());
        if exec_state.lane_slots.is_empty() {
            exec_state.lane_slots = (0..graph.lane_streams.len())
                .map(|_| self.streams.slots.allocate(SlotOwner::GraphLane { exec, launch_slot: stream.slot }))
                .collect();
        }
        base.join(&exec_state.end);
        let mut found = Vec::new();
        let mut clocks: Vec<VectorClock> = Vec::with_capacity(graph.nodes.len());
        let mut end = base.clone();
        for node in &graph.nodes {
            let mut clock = base.clone();
            for &dep in &node.deps {
                clock.join(&clocks[dep]);
            }
            if let NodeKind::WaitEvent { event } = node.kind {
                self.events.with(event, |e| {
                    if let EventState::Recorded(recorded) = &*e.lock() {
                        clock.join(recorded);
                    }
                });
            }
            let epoch = clock.tick(exec_state.lane_slots[node.lane]);
            let op = OpRecord::new(&node.origin, node.kernel, epoch);
            match &node.kind {
                NodeKind::Work { accesses } => {
                    for access in accesses {
                        self.access(access, &clock, op, &mut found);
                    }
                }
                NodeKind::Alloc { base, size, ctx } => {
                    let alloc = Alloc { base: *base, size: *size, kind: MemoryKind::GraphOwned, ctx: *ctx };
                    self.register(alloc, op);
                }
                NodeKind::Free { base } => self.release(*base, op, &clock, &mut found),
                NodeKind::RecordEvent { event } => self.events.with(*event, |e| *e.lock() = EventState::Recorded(clock.clone())),
                NodeKind::HostFunc(callback) => callback.set(&clock),
                NodeKind::WaitEvent { .. } | NodeKind::Empty => {}
            }
            end.join(&clock);
            clocks.push(clock);
        }
        exec_state.end.assign(&end);
        drop(exec_state);
        let mut state = stream.lock();
        state.clock.join(&end);
        stream.changed();
        drop(state);
        self.publish(found);
    }
}
