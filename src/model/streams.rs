//! Streams and contexts, default streams, and the slots of the vector clocks: each stream owns
//! a slot and a clock behind its own lock; a destroyed stream's slot is reused once its work
//! is ordered before the host (`docs/semantics.md#streams-and-default-streams`).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::hash::{fast_map, FastMap};
use crate::thread_cache::ThreadCache;

use super::capture::{Capture, CaptureLane};
use super::clock::{Epoch, HostClock, HostSnapshot, Slot, VectorClock, HOST};
use super::lock::{Guard, Lock};
use super::op::{GridWait, StackId, ThreadId};
use super::peers::PeerStream;

/// How the shim names a stream: a handle, or the default stream of an entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamRef {
    /// The legacy default stream of a context (handle 0 in a legacy entry point, or
    /// `CU_STREAM_LEGACY`).
    Legacy { ctx: u64 },
    /// A thread's per-thread default stream (handle 0 in a `_ptsz`/`_ptds` entry point, or
    /// `CU_STREAM_PER_THREAD`).
    PerThread { ctx: u64, thread: ThreadId },
    /// A created stream.
    Handle(u64),
}

/// How a stream synchronizes with the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    LegacyDefault,
    PerThreadDefault,
    /// Created without `CU_STREAM_NON_BLOCKING`: synchronizes with the legacy stream.
    Blocking,
    NonBlocking,
}

impl StreamKind {
    /// Whether the legacy default stream synchronizes with it.
    pub fn is_blocking(self) -> bool {
        matches!(self, StreamKind::PerThreadDefault | StreamKind::Blocking)
    }

    pub fn label(self) -> &'static str {
        match self {
            StreamKind::LegacyDefault => "legacy-default",
            StreamKind::PerThreadDefault => "per-thread-default",
            StreamKind::Blocking => "blocking",
            StreamKind::NonBlocking => "non-blocking",
        }
    }
}

/// What the shim tells the model about a stream it did not see created.
#[derive(Clone, Copy, Debug)]
pub struct StreamInfo {
    pub ctx: u64,
    pub non_blocking: bool,
}

/// Who a slot belongs to, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotOwner {
    Host,
    Stream {
        handle: u64,
        ctx: u64,
        kind: StreamKind,
        created_at: StackId,
        thread: ThreadId,
    },
    /// A lane of an executable graph; its nodes ran on the stream that issued `launch`.
    GraphLane {
        exec: u64,
        launch: Epoch,
    },
    /// An owner of a slot used by so many owners since that its name was forgotten.
    Forgotten,
    /// A stream of another process sharing memory or events with this one.
    Peer(PeerStream),
}

/// Owners remembered per slot, the latest ones: a report names the owner of an epoch of an
/// older one as [`SlotOwner::Forgotten`].
const OWNERS_PER_SLOT: usize = 16;

/// The owners of one slot, oldest first, each with the first time it could use.
type Owners = Vec<(u32, SlotOwner)>;

/// The owners of every slot, and the context of each slot's latest owner.
struct Table {
    owners: Vec<Owners>,
    /// By slot: the context of its latest owner, if a stream (not the host, not a lane).
    contexts: Vec<Option<u64>>,
}

/// Hands out slots, takes them back, and remembers their owners.
pub struct Slots {
    table: RwLock<Table>,
    /// The owners of the operations of the races found, kept when their slots' histories
    /// move on: a report written at exit names the streams of a race found long before,
    /// whatever used the slots since (a test suite's thousands of graph launches).
    pinned: FastMap<Epoch, SlotOwner>,
    /// Slots whose last owner is gone, with the last time it used, every operation of
    /// which happens before the host's clock: whatever is issued from now on follows them.
    free: Mutex<Vec<(Slot, u32)>>,
    /// The lanes of destroyed graphs, with their last times: free for a launch whose clock
    /// is ordered after that time.
    free_lanes: Mutex<Vec<(Slot, u32)>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slots {
    pub fn new() -> Slots {
        Slots {
            table: RwLock::new(Table { owners: vec![vec![(0, SlotOwner::Host)]], contexts: vec![None] }),
            pinned: fast_map(),
            free: Mutex::new(Vec::new()),
            free_lanes: Mutex::new(Vec::new()),
        }
    }

    /// A slot for a stream: a free one, else a new one. (Its first operation joins the host's
    /// clock, and so follows every operation of the slot's earlier owners.)
    pub fn allocate(&self, owner: SlotOwner) -> Slot {
        let reused = locked(&self.free).pop();
        self.hand_out(owner, reused)
    }

    /// A slot for a graph lane whose first node's clock is `base`: a destroyed graph's lane
    /// that `base` is ordered after (of the latest few), or a free slot, or a new one.
    pub fn allocate_lane(&self, owner: SlotOwner, base: &VectorClock) -> Slot {
        let reused = {
            let mut lanes = locked(&self.free_lanes);
            let from = lanes.len().saturating_sub(4);
            let found = (from..lanes.len()).rev().find(|&i| base.get(lanes[i].0) >= lanes[i].1);
            found.map(|i| lanes.swap_remove(i))
        };
        let reused = reused.or_else(|| locked(&self.free).pop());
        self.hand_out(owner, reused)
    }

    fn hand_out(&self, owner: SlotOwner, reused: Option<(Slot, u32)>) -> Slot {
        let context = match owner {
            SlotOwner::Stream { ctx, .. } => Some(ctx),
            _ => None,
        };
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        match reused {
            Some((slot, last)) => {
                let history = &mut table.owners[slot as usize];
                // No earlier than the latest owner's first time: an owner that did nothing
                // retires at its clock's 0, and its successor must not claim the epochs of
                // those before. It starts where that owner would have (its first operation
                // follows the host's time in the slot), and shares its first time: the later
                // of two owners of a time is the one named.
                let first = (last + 1).max(history.last().map_or(0, |&(first, _)| first));
                if history.len() == OWNERS_PER_SLOT {
                    history.remove(0);
                }
                history.push((first, owner));
                table.contexts[slot as usize] = context;
                slot
            }
            None => {
                table.owners.push(vec![(0, owner)]);
                table.contexts.push(context);
                (table.owners.len() - 1) as Slot
            }
        }
    }

    /// A slot for a stream of another process: never taken back.
    pub fn allocate_peer(&self, owner: SlotOwner) -> Slot {
        self.hand_out(owner, None)
    }

    /// Names `owner` the owner of `slot` from time `first` on, if it is not already: the
    /// slot stands for another process's slot, whose owners that process names. An owner
    /// heard of out of order (a measured launch published late) keeps the later one's name.
    pub fn rename(&self, slot: Slot, first: u32, owner: SlotOwner) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let Some(history) = table.owners.get_mut(slot as usize) else { return };
        if history.last().is_some_and(|(since, latest)| *latest == owner || *since >= first) {
            return;
        }
        if history.len() == OWNERS_PER_SLOT {
            history.remove(0);
        }
        history.push((first, owner));
    }

    /// Whether what any clock knows of `slot` is known, by the time the host waits for
    /// context `ctx`, from the clocks that wait joins or from the host's own: `slot` is the
    /// host's, or its latest owner is a stream of `ctx`. Such a stream is one of the
    /// context's streams until the host has joined its last operation, and its own time is
    /// the latest of its slot; an earlier owner of the slot was retired once the host had
    /// joined its last one (a slot's owner changes only then).
    fn known_at_sync(&self, table: &Table, slot: Slot, ctx: u64) -> bool {
        slot == HOST || table.contexts.get(slot as usize).copied().flatten() == Some(ctx)
    }

    /// Takes back a slot whose owner is gone and whose every operation (the last at time
    /// `last`) happens before the host's clock.
    fn retire(&self, slot: Slot, last: u32) {
        locked(&self.free).push((slot, last));
    }

    /// Takes back a lane of a destroyed graph, `last` the time of its last node.
    pub fn retire_lane(&self, slot: Slot, last: u32) {
        locked(&self.free_lanes).push((slot, last));
    }

    /// Who issued the operation `epoch`.
    pub fn owner(&self, epoch: Epoch) -> SlotOwner {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        let Some(history) = table.owners.get(epoch.slot as usize) else { return SlotOwner::Host };
        match history.iter().rev().find(|(first, _)| *first <= epoch.time) {
            Some((_, owner)) => owner.clone(),
            None => self.pinned.get(&epoch).map_or(SlotOwner::Forgotten, |owner| owner.clone()),
        }
    }

    /// Keeps the owner of `epoch` (and of the launch of its graph lane) for reports, however
    /// many owners its slot has after: for the operations of a race, when it is found.
    pub fn pin(&self, epoch: Epoch) {
        let owner = self.owner(epoch);
        if let SlotOwner::GraphLane { launch, .. } = owner {
            self.pin(launch);
        }
        if !matches!(owner, SlotOwner::Forgotten | SlotOwner::Host) {
            self.pinned.entry(epoch).or_insert(owner);
        }
    }

    /// How many slots were ever handed out (for tests).
    pub fn count(&self) -> usize {
        self.table.read().unwrap_or_else(|e| e.into_inner()).owners.len()
    }
}

impl Default for Slots {
    fn default() -> Self {
        Slots::new()
    }
}

/// A stream's mutable state.
pub struct StreamState {
    pub clock: VectorClock,
    /// Set while the stream takes part in a graph capture.
    pub capture: Option<CaptureLane>,
    /// The time of the stream's last operation, if it was a kernel launch: the kernel a
    /// programmatic launch after it may overlap.
    pub last_kernel: Option<u32>,
    /// The next launch on the stream is programmatic, its kernel's wait as given
    /// ([`crate::model::Model::programmatic_next_launch`]).
    pub programmatic_next: Option<GridWait>,
}

pub struct Stream {
    pub slot: Slot,
    pub kind: StreamKind,
    pub ctx: u64,
    pub handle: u64,
    state: Lock<StreamState>,
    /// Counts changes of the clock, so that a reader can skip an unchanged one.
    pub version: AtomicU64,
    /// The host clock's version last joined into this stream.
    pub host_seen: AtomicU64,
    /// The legacy stream's version last joined (blocking streams).
    pub legacy_seen: AtomicU64,
    /// A blocking stream's context's legacy stream, which it synchronizes with.
    pub legacy: Option<Arc<Stream>>,
    /// A blocking stream's version last joined into its legacy stream's clock (written under
    /// the legacy stream's lock, once the join is in its clock).
    pub joined_by_legacy: AtomicU64,
    /// On a legacy stream: whether a blocking stream of its context changed since the legacy
    /// stream last joined them. Lets a legacy-stream operation skip the member list (a lock
    /// and reference counts) when none did, as in a program that uses the legacy stream only.
    blocking_changed: AtomicBool,
    /// Whether the stream is capturing (mirrors `state.capture`, read without the lock).
    pub capturing: AtomicBool,
    pub destroyed: AtomicBool,
    /// This stream, for queueing itself on its legacy stream.
    me: Weak<Stream>,
    /// A blocking stream: whether it is queued on its legacy stream's `changed_blocking`.
    queued: AtomicBool,
    /// A legacy stream: the blocking streams that changed since it last joined them.
    changed_blocking: Mutex<Vec<Weak<Stream>>>,
}

impl Stream {
    fn new(
        slot: Slot,
        kind: StreamKind,
        ctx: u64,
        handle: u64,
        legacy: Option<Arc<Stream>>,
        me: Weak<Stream>,
    ) -> Stream {
        Stream {
            me,
            queued: AtomicBool::new(false),
            changed_blocking: Mutex::new(Vec::new()),
            slot,
            kind,
            ctx,
            handle,
            legacy,
            joined_by_legacy: AtomicU64::new(u64::MAX),
            blocking_changed: AtomicBool::new(false),
            state: Lock::new(StreamState {
                clock: VectorClock::new(),
                capture: None,
                last_kernel: None,
                programmatic_next: None,
            }),
            version: AtomicU64::new(0),
            host_seen: AtomicU64::new(u64::MAX),
            legacy_seen: AtomicU64::new(u64::MAX),
            capturing: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> Guard<'_, StreamState> {
        self.state.lock()
    }

    /// Whether the stream takes part in `capture`.
    pub fn captures_into(&self, capture: &Arc<Capture>) -> bool {
        self.lock().capture.as_ref().is_some_and(|lane| Arc::ptr_eq(&lane.capture, capture))
    }

    /// Joins this stream's clock into `into`.
    pub fn join_into(&self, into: &mut VectorClock) {
        into.join(&self.lock().clock);
    }

    /// Marks a change of the clock (call with the lock held, after the change). The lock
    /// makes this thread the only writer: a plain store, not a read-modify-write, on the
    /// issue path.
    pub fn changed(&self) {
        self.version.store(self.version.load(Ordering::Relaxed) + 1, Ordering::Release);
        if let Some(legacy) = &self.legacy {
            // A read-modify-write, not "load, and swap if clear": the legacy stream clears the
            // flag before it reads the version, and this swap either comes after that clear
            // (and queues the stream again) or is read by it (and the version with it).
            if !self.queued.swap(true, Ordering::AcqRel) {
                let mut queue = legacy.changed_blocking.lock().unwrap_or_else(|e| e.into_inner());
                // Streams gone everywhere else leave; the queue holds at most the live ones.
                if queue.len() >= 64 && queue.len().is_power_of_two() {
                    queue.retain(|s| s.strong_count() > 0);
                }
                queue.push(self.me.clone());
            }
            legacy.note_blocking_change();
        }
    }

    /// On a legacy stream: a blocking stream of its context changed (after its `version`).
    ///
    /// Always a store, never "load, and store if clear": the load could be answered before
    /// the `version` store is visible (a store may wait in the processor's buffer while a
    /// later load goes ahead), see the flag still set, and skip the store while the legacy
    /// stream clears the flag and reads the old version: the change would be lost. A
    /// release store either lands before the legacy stream's swap, which then sees the new
    /// version, or after it, and stays set for the next legacy operation.
    fn note_blocking_change(&self) {
        self.blocking_changed.store(true, Ordering::Release);
    }

    /// On a legacy stream: whether a blocking stream changed since the last call, clearing
    /// the flag. Cleared before the members' versions are read, so a change made meanwhile is
    /// either read now or flagged again.
    pub fn take_blocking_changes(&self) -> bool {
        self.blocking_changed.load(Ordering::Acquire) && self.blocking_changed.swap(false, Ordering::AcqRel)
    }

    /// On a legacy stream: the blocking streams queued since the last call, each unqueued
    /// before its version is read ([`Stream::changed`]). Only they can have changed, so the
    /// cost is theirs, not the context's.
    pub fn take_changed_blocking(&self) -> Vec<Arc<Stream>> {
        let queued = std::mem::take(&mut *self.changed_blocking.lock().unwrap_or_else(|e| e.into_inner()));
        queued
            .into_iter()
            .filter_map(|s| s.upgrade())
            .inspect(|s| {
                s.queued.swap(false, Ordering::AcqRel);
            })
            .collect()
    }

    /// Joins into `into` the clock of every stream of `streams` that changed since the legacy
    /// stream last joined it, noting in `joined` (index, version) for each: the caller marks
    /// them ([`Stream::joined_by_legacy`]) once `into` is in the legacy clock.
    pub fn join_blocking_into(streams: &[Arc<Stream>], into: &mut VectorClock, joined: &mut Vec<(usize, u64)>) {
        for (i, stream) in streams.iter().enumerate() {
            let version = stream.version.load(Ordering::Acquire);
            if stream.joined_by_legacy.load(Ordering::Relaxed) != version {
                stream.join_into(into);
                joined.push((i, version));
            }
        }
    }
}

/// A context: its legacy default stream and every stream created in it.
pub struct Context {
    pub handle: u64,
    pub legacy: Arc<Stream>,
    members: RwLock<Vec<Arc<Stream>>>,
}

impl Context {
    pub fn members(&self) -> Vec<Arc<Stream>> {
        self.members.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The streams of the context, borrowed for as long as the guard lives.
    pub fn members_guard(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Stream>>> {
        self.members.read().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, stream: Arc<Stream>) {
        self.members.write().unwrap_or_else(|e| e.into_inner()).push(stream);
    }

    /// Forgets destroyed streams whose work the host has joined: nothing can wait for them
    /// any more, and their slots go back to `slots`.
    fn prune(&self, host: &Host, slots: &Slots) {
        if !self.members_guard().iter().any(|s| s.destroyed.load(Ordering::Relaxed)) {
            return;
        }
        self.members.write().unwrap_or_else(|e| e.into_inner()).retain(|s| {
            if !s.destroyed.load(Ordering::Relaxed) {
                return true;
            }
            let last = s.lock().clock.get(s.slot);
            let pending = last > host.get(s.slot);
            if !pending {
                slots.retire(s.slot, last);
            }
            pending
        });
    }
}

/// Every stream and context the process has used.
pub struct Streams {
    pub slots: Slots,
    contexts: FastMap<u64, Arc<Context>>,
    streams: FastMap<StreamRef, Arc<Stream>>,
    /// Tells this table's entries in [`RECENT`] from another table's.
    id: u64,
}

/// Bumped whenever a name may come to mean another stream (a handle created again or
/// destroyed, a context removed) and whenever a table is made: a thread's [`RECENT`] entries
/// of an older generation are not used.
static GENERATION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The streams this thread resolved lately, by (table, name) ([`crate::thread_cache`]).
    static RECENT: RefCell<ThreadCache<(u64, StreamRef), Arc<Stream>, 64>> = RefCell::new(ThreadCache::default());
}

fn new_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::AcqRel) + 1
}

impl Streams {
    pub fn new() -> Streams {
        Streams { slots: Slots::new(), contexts: fast_map(), streams: fast_map(), id: new_generation() }
    }

    /// The context `ctx`, created on first use.
    pub fn context(&self, ctx: u64) -> Arc<Context> {
        if let Some(c) = self.contexts.get(&ctx) {
            return c.clone();
        }
        self.contexts
            .entry(ctx)
            .or_insert_with(|| {
                let slot = self.slots.allocate(SlotOwner::Stream {
                    handle: 0,
                    ctx,
                    kind: StreamKind::LegacyDefault,
                    created_at: StackId::default(),
                    thread: ThreadId::default(),
                });
                let legacy =
                    Arc::new_cyclic(|me| Stream::new(slot, StreamKind::LegacyDefault, ctx, 0, None, me.clone()));
                Arc::new(Context { handle: ctx, legacy: legacy.clone(), members: RwLock::new(vec![legacy]) })
            })
            .clone()
    }

    fn register(
        &self,
        key: StreamRef,
        ctx: u64,
        kind: StreamKind,
        created_at: StackId,
        thread: ThreadId,
    ) -> Arc<Stream> {
        let handle = match key {
            StreamRef::Handle(h) => h,
            _ => 0,
        };
        let slot = self.slots.allocate(SlotOwner::Stream { handle, ctx, kind, created_at, thread });
        let context = self.context(ctx);
        let legacy = kind.is_blocking().then(|| context.legacy.clone());
        let stream = Arc::new_cyclic(|me| Stream::new(slot, kind, ctx, handle, legacy, me.clone()));
        context.add(stream.clone());
        stream
    }

    /// A stream the program just created.
    pub fn created(&self, handle: u64, ctx: u64, non_blocking: bool, site: StackId, thread: ThreadId) -> Arc<Stream> {
        let kind = if non_blocking { StreamKind::NonBlocking } else { StreamKind::Blocking };
        let key = StreamRef::Handle(handle);
        let stream = self.register(key, ctx, kind, site, thread);
        if let Some(old) = self.streams.insert(key, stream.clone()) {
            // The handle was reused without our seeing the old stream destroyed.
            old.destroyed.store(true, Ordering::Relaxed);
        }
        // After the change: a lookup that raced with it is cached under the old generation.
        new_generation();
        stream
    }

    /// Forgets a destroyed stream's handle; its pending work still counts.
    pub fn destroyed(&self, handle: u64) -> Option<Arc<Stream>> {
        let (_, stream) = self.streams.remove(&StreamRef::Handle(handle))?;
        new_generation();
        stream.destroyed.store(true, Ordering::Relaxed);
        Some(stream)
    }

    /// The stream `key` names; `describe` tells the context and flags of a stream handle
    /// never seen created.
    pub fn resolve(&self, key: StreamRef, describe: &dyn Fn(u64) -> Option<StreamInfo>) -> Arc<Stream> {
        let generation = GENERATION.load(Ordering::Acquire);
        let recent = RECENT.try_with(|recent| recent.try_borrow().ok()?.get(&(self.id, key), generation).cloned());
        if let Ok(Some(stream)) = recent {
            return stream;
        }
        let stream = self.resolve_shared(key, describe);
        let _ = RECENT.try_with(|recent| {
            if let Ok(mut recent) = recent.try_borrow_mut() {
                recent.put((self.id, key), generation, stream.clone());
            }
        });
        stream
    }

    /// [`Streams::resolve`] through the shared tables.
    fn resolve_shared(&self, key: StreamRef, describe: &dyn Fn(u64) -> Option<StreamInfo>) -> Arc<Stream> {
        match key {
            StreamRef::Legacy { ctx } => self.context(ctx).legacy.clone(),
            _ => {
                if let Some(s) = self.streams.get(&key) {
                    return s.clone();
                }
                let (ctx, kind, thread) = match key {
                    StreamRef::PerThread { ctx, thread } => (ctx, StreamKind::PerThreadDefault, thread),
                    StreamRef::Handle(h) => {
                        let info = describe(h).unwrap_or(StreamInfo { ctx: 0, non_blocking: false });
                        let kind = if info.non_blocking { StreamKind::NonBlocking } else { StreamKind::Blocking };
                        (info.ctx, kind, ThreadId::default())
                    }
                    StreamRef::Legacy { .. } => unreachable!(),
                };
                self.streams
                    .entry(key)
                    .or_insert_with(|| self.register(key, ctx, kind, StackId::default(), thread))
                    .clone()
            }
        }
    }

    /// A destroyed stream: if the host has joined all its work, it leaves its context and
    /// its slot is free; else a later synchronization of the context does that, and until
    /// then it keeps only what that synchronization needs from it.
    pub fn retire_if_done(&self, stream: &Stream, host: &Host) {
        if stream.lock().clock.get(stream.slot) <= host.get(stream.slot) {
            if let Some(context) = self.contexts.get(&stream.ctx).map(|c| c.clone()) {
                context.prune(host, &self.slots);
            }
        } else {
            self.keep_what_a_sync_needs(stream);
        }
    }

    /// Shortens the clock of a destroyed stream whose work the host has not joined: a
    /// synchronization of its context (where the host joins it) learns from it only its own
    /// time and the times of slots owned outside the context (another context's streams, a
    /// graph's lanes); the others it learns as well from the context's other streams or
    /// from the host's own clock ([`Slots::known_at_sync`]). Otherwise streams forked from
    /// one stream, joined back to it and destroyed, with no synchronization between, would
    /// each keep a clock of every stream forked before them: memory quadratic in the streams
    /// made between two synchronizations. The legacy stream joins a blocking
    /// stream's whole clock at its next operation if the stream changed since it last did:
    /// such a stream keeps its clock. So does one destroyed while it captures.
    fn keep_what_a_sync_needs(&self, stream: &Stream) {
        if stream.capturing.load(Ordering::Acquire) {
            return;
        }
        let mut state = stream.lock();
        let joined = stream.joined_by_legacy.load(Ordering::Relaxed) == stream.version.load(Ordering::Acquire);
        if stream.kind.is_blocking() && !joined {
            return;
        }
        let table = self.slots.table.read().unwrap_or_else(|e| e.into_inner());
        state.clock.forget_own(|slot| slot == stream.slot || !self.slots.known_at_sync(&table, slot, stream.ctx));
    }

    /// The host waits for every stream of context `ctx` (`H ⊔= C_S` for each, in one change),
    /// after which the destroyed ones are forgotten and their slots freed.
    pub fn host_waits_for_context(&self, ctx: u64, host: &Host) {
        let Some(context) = self.contexts.get(&ctx).map(|c| c.clone()) else { return };
        host.join_streams(context.members_guard().iter());
        context.prune(host, &self.slots);
    }

    /// Forgets a context and its streams (destroyed or reset): the host has waited for their
    /// work, and their slots are free.
    pub fn remove_context(&self, ctx: u64, host: &Host) {
        let Some((_, context)) = self.contexts.remove(&ctx) else { return };
        self.streams.retain(|_, s| s.ctx != ctx);
        new_generation();
        let members = context.members();
        host.join_streams(&members);
        for stream in &members {
            self.slots.retire(stream.slot, stream.lock().clock.get(stream.slot));
        }
    }
}

impl Default for Streams {
    fn default() -> Self {
        Streams::new()
    }
}

/// The host's clock: one for the process (`docs/semantics.md#clocks`).
pub struct Host {
    clock: RwLock<HostClock>,
    /// Counts the clock's changes, readable without the lock.
    pub version: AtomicU64,
}

impl Host {
    pub fn new() -> Host {
        Host { clock: RwLock::new(HostClock::default()), version: AtomicU64::new(0) }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HostClock> {
        self.clock.write().unwrap_or_else(|e| e.into_inner())
    }

    /// `H ⊔= clock`.
    pub fn join(&self, clock: &VectorClock) {
        self.join_entries(clock.own_entries());
    }

    /// `H ⊔=` the clocks of `streams`, each read under its own lock, in one change of the
    /// host's clock (linear in what they hold beyond the host).
    pub fn join_streams<'a>(&self, streams: impl IntoIterator<Item = &'a Arc<Stream>>) {
        let mut entries = Vec::new();
        for stream in streams {
            entries.extend_from_slice(stream.lock().clock.own_entries());
        }
        self.join_entries(&entries);
    }

    fn join_entries(&self, entries: &[(Slot, u32)]) {
        if self.write().join_entries(entries) {
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// Ticks the host's own component: a host-side event such as a synchronous allocation.
    pub fn tick(&self) -> super::clock::Epoch {
        let epoch = self.write().tick();
        self.version.fetch_add(1, Ordering::Release);
        epoch
    }

    /// `into ⊔= H`.
    pub fn join_into(&self, into: &mut VectorClock) {
        into.join_host(&self.current());
    }

    /// The host's clock now, shared.
    pub fn current(&self) -> Arc<HostSnapshot> {
        self.write().snapshot()
    }

    /// The host's clock now, as a clock.
    pub fn snapshot(&self) -> VectorClock {
        let mut clock = VectorClock::new();
        self.join_into(&mut clock);
        clock
    }

    /// The host's time in `slot`.
    pub fn get(&self, slot: Slot) -> u32 {
        self.clock.read().unwrap_or_else(|e| e.into_inner()).get(slot)
    }
}

impl Default for Host {
    fn default() -> Self {
        Host::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forks `count` streams of context 1 from `main` and joins each back (as an event
    /// recorded on one and waited on by the other does), each destroyed with its work
    /// pending: the host never waits. Returns them.
    fn fork_join(streams: &Streams, host: &Host, main: &Stream, count: u64, non_blocking: bool) -> Vec<Arc<Stream>> {
        (0..count)
            .map(|i| {
                let handle = 0x1000 + i;
                let side = streams.created(handle, 1, non_blocking, StackId(0), ThreadId(1));
                let fork = main.lock().clock.clone();
                let mut state = side.lock();
                state.clock.join(&fork);
                state.clock.tick(side.slot);
                let join = state.clock.clone();
                drop(state);
                let mut state = main.lock();
                state.clock.join(&join);
                state.clock.tick(main.slot);
                drop(state);
                streams.destroyed(handle);
                streams.retire_if_done(&side, host);
                side
            })
            .collect()
    }

    fn stream_owner(handle: u64) -> SlotOwner {
        SlotOwner::Stream { handle, ctx: 1, kind: StreamKind::NonBlocking, created_at: StackId(0), thread: ThreadId(1) }
    }

    #[test]
    fn a_reused_slot_names_each_owner_of_its_operations() {
        let slots = Slots::new();
        let slot = slots.allocate(stream_owner(1));
        // Owner 1 issued times 1 to 5; owner 2 none (it gives the slot back at its clock's
        // 0); owner 3's first operation, after the host's 5, is at 6.
        slots.retire(slot, 5);
        assert_eq!(slots.allocate(stream_owner(2)), slot);
        slots.retire(slot, 0);
        assert_eq!(slots.allocate(stream_owner(3)), slot);
        assert_eq!(slots.count(), 2, "the host's slot and this one");
        assert_eq!(slots.owner(Epoch::new(slot, 5)), stream_owner(1));
        assert_eq!(slots.owner(Epoch::new(slot, 6)), stream_owner(3));
    }

    #[test]
    fn a_destroyed_stream_s_slot_goes_to_the_next_stream_once_the_host_joined_its_work() {
        let (streams, host) = (Streams::new(), Host::new());
        let first = streams.created(0x10, 1, true, StackId(0), ThreadId(1));
        first.lock().clock.tick(first.slot);
        streams.destroyed(0x10);
        streams.retire_if_done(&first, &host);
        let pending = streams.created(0x20, 1, true, StackId(0), ThreadId(1));
        assert_ne!(pending.slot, first.slot, "its work is not ordered before the host yet");
        host.join(&first.lock().clock);
        streams.host_waits_for_context(1, &host);
        let next = streams.created(0x30, 1, true, StackId(0), ThreadId(1));
        assert_eq!(next.slot, first.slot);
    }

    #[test]
    fn a_destroyed_graph_s_lane_goes_to_a_launch_ordered_after_its_last_node() {
        let slots = Slots::new();
        let lane = |launch| SlotOwner::GraphLane { exec: 1, launch: Epoch::new(1, launch) };
        let slot = slots.allocate_lane(lane(1), &VectorClock::new());
        slots.retire_lane(slot, 3);
        let mut before = VectorClock::new();
        before.set(slot, 2);
        let other = slots.allocate_lane(lane(2), &before);
        assert_ne!(other, slot, "a launch not ordered after the lane's last node");
        let mut after = VectorClock::new();
        after.set(slot, 3);
        assert_eq!(slots.allocate_lane(lane(3), &after), slot);
    }

    #[test]
    fn the_legacy_stream_s_queue_of_changed_blocking_streams_keeps_the_live_ones_only() {
        let (streams, host) = (Streams::new(), Host::new());
        let legacy = streams.context(1).legacy.clone();
        let blocking = |handle| streams.created(handle, 1, false, StackId(0), ThreadId(1));
        let live: Vec<Arc<Stream>> = (0x100..0x140).map(blocking).collect();
        for stream in &live {
            stream.changed();
        }
        // A thousand more change and are gone everywhere else: the queue drops them as it grows.
        for handle in 0x1000..0x1400 {
            let stream = blocking(handle);
            stream.changed();
            streams.destroyed(handle);
            streams.retire_if_done(&stream, &host);
        }
        let queued = legacy.changed_blocking.lock().unwrap().len();
        assert!(queued <= 2 * live.len(), "{queued} queued");
        let taken = legacy.take_changed_blocking();
        assert_eq!(taken.len(), live.len());
        assert!(taken.iter().zip(&live).all(|(a, b)| Arc::ptr_eq(a, b)));
    }

    #[test]
    fn a_context_removed_takes_its_streams_names_with_it_and_no_other_s() {
        let (streams, host) = (Streams::new(), Host::new());
        let gone = streams.created(0x10, 1, true, StackId(0), ThreadId(1));
        let kept = streams.created(0x20, 2, true, StackId(0), ThreadId(1));
        streams.remove_context(1, &host);
        let unknown = |_| None;
        assert!(Arc::ptr_eq(&streams.resolve(StreamRef::Handle(0x20), &unknown), &kept));
        let again = streams.resolve(StreamRef::Handle(0x10), &unknown);
        assert!(!Arc::ptr_eq(&again, &gone), "the handle names a stream never seen");
    }

    #[test]
    fn a_destroyed_pending_stream_keeps_only_what_a_sync_of_its_context_needs() {
        let (streams, host) = (Streams::new(), Host::new());
        let main = streams.created(0x100, 1, true, StackId(0), ThreadId(1));
        // An operation of another context's stream, which main is ordered after.
        let other = streams.created(0x200, 2, true, StackId(0), ThreadId(1));
        let foreign = other.lock().clock.tick(other.slot);
        main.lock().clock.set(foreign.slot, foreign.time);
        let sides = fork_join(&streams, &host, &main, 200, true);
        // Each side knew of main and of every side forked before it: 20,000 entries in all.
        for side in &sides {
            let clock = &side.lock().clock;
            assert_eq!(clock.own_len(), 2, "its own time and the other context's");
            assert_eq!((clock.get(side.slot), clock.get(foreign.slot)), (1, foreign.time));
        }
        // The host, waiting for context 1, learns what it learnt before: every side's work,
        // and the other context's operation (here through main as well).
        streams.host_waits_for_context(1, &host);
        assert!(sides.iter().all(|s| host.get(s.slot) == 1) && host.get(foreign.slot) == foreign.time);
    }

    #[test]
    fn a_destroyed_blocking_stream_keeps_its_clock_for_the_legacy_stream() {
        let (streams, host) = (Streams::new(), Host::new());
        let main = streams.created(0x100, 1, true, StackId(0), ThreadId(1));
        let sides = fork_join(&streams, &host, &main, 20, false);
        assert_eq!(sides.last().unwrap().lock().clock.own_len(), 21, "main, the 19 sides before it, and its own");
    }
}
