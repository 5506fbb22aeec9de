//! The model against a brute-force oracle: random programs of two host threads over two
//! devices, and an oracle that builds the whole happens-before graph (an edge per rule of
//! `docs/semantics.md`) and answers by reachability. The oracle keeps a host clock per
//! thread, the model one for the process (`docs/semantics.md#clocks`), which orders more; so
//! every race the model reports is the oracle's, of the same kind, and every race the oracle
//! sees is reported, of exactly its kinds, up to the first operation a thread issues knowing
//! less than the other has waited for.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use streamsan::model::buffers::MemoryKind;
use streamsan::model::op::{Access, HostEffect, KernelId, Mode, Origin, StackId, ThreadId};
use streamsan::model::race::{NoteKind, RaceEntry, RaceKind};
use streamsan::model::streams::{StreamInfo, StreamRef};
use streamsan::model::{Alloc, FreeOn, Model, Sink, Work};

const CTX: [u64; 2] = [0xc1, 0xc2];
const BUFFERS: usize = 4;
const EVENTS: usize = 3;

/// The streams a program uses: legacy and per-thread defaults, blocking and non-blocking.
fn stream_ref(i: usize) -> StreamRef {
    match i {
        0 => StreamRef::Legacy { ctx: CTX[0] },
        1 => StreamRef::Legacy { ctx: CTX[1] },
        2 => StreamRef::PerThread { ctx: CTX[0], thread: ThreadId(1) },
        3 => StreamRef::PerThread { ctx: CTX[0], thread: ThreadId(2) },
        4 => StreamRef::Handle(0x104), // blocking, ctx 0
        5 => StreamRef::Handle(0x105), // non-blocking, ctx 0
        6 => StreamRef::Handle(0x106), // blocking, ctx 1
        _ => StreamRef::Handle(0x107), // non-blocking, ctx 1
    }
}
const STREAMS: usize = 8;
/// Streams that can capture (created streams).
const CAPTURABLE: [usize; 4] = [4, 5, 6, 7];

fn stream_ctx(i: usize) -> u64 {
    match i {
        0 | 2 | 3 | 4 | 5 => CTX[0],
        _ => CTX[1],
    }
}

fn blocking(i: usize) -> bool {
    matches!(i, 2 | 3 | 4 | 6)
}

fn is_legacy(i: usize) -> bool {
    i <= 1
}

/// What each buffer is: device memory (the only memory that can be untouched), pinned host,
/// managed, and a block declared through the annotation API.
fn buffer_kind(b: usize, async_alloc: bool) -> MemoryKind {
    match b {
        _ if async_alloc => MemoryKind::StreamOrdered,
        0 => MemoryKind::Device,
        1 => MemoryKind::PinnedHost,
        2 => MemoryKind::Managed,
        _ => MemoryKind::Annotated,
    }
}

/// Whether the host may write the buffer unseen, so that no byte of it is ever untouched.
fn written_by_the_host(b: usize, async_alloc: bool) -> bool {
    !async_alloc && (b == 1 || b == 2)
}

fn buffer_base(b: usize) -> u64 {
    0x1000_0000 + (b as u64) * 0x10_0000
}

const BUFFER_SIZE: u64 = 256;

#[derive(Clone, Debug)]
enum Item {
    /// An access by a node on the origin (lane 0) or the forked stream (lane 1).
    Node { lane: usize, buffer: usize, offset: u8, mode: u8 },
    /// The forked stream waits on the origin's work so far.
    ForkSync,
    /// The origin waits on the forked stream's work so far.
    JoinSync,
}

#[derive(Clone, Debug)]
enum Step {
    /// `mode`: see [`kind_of`].
    Access {
        stream: usize,
        buffer: usize,
        offset: u8,
        len: u8,
        mode: u8,
        host: u8,
    },
    AllocAsync {
        stream: usize,
        buffer: usize,
    },
    AllocSync {
        buffer: usize,
    },
    FreeAsync {
        stream: usize,
        buffer: usize,
    },
    FreeSync {
        buffer: usize,
    },
    Record {
        event: usize,
        stream: usize,
    },
    Wait {
        stream: usize,
        event: usize,
    },
    EventSync {
        event: usize,
    },
    /// The event destroyed and its handle made again: a fresh, unrecorded event.
    EventRecreate {
        event: usize,
    },
    StreamSync {
        stream: usize,
    },
    /// The created stream destroyed and its handle made again: a fresh stream, ordered after
    /// nothing of the old one's (which may take the old one's slot of the clocks).
    StreamRecreate {
        stream: usize,
    },
    CtxSync {
        ctx: usize,
    },
    HostFunc {
        stream: usize,
    },
    /// `cuStreamWriteValue32` of the word at `offset` of `buffer`.
    WriteValue {
        stream: usize,
        buffer: usize,
        offset: u8,
    },
    /// `cuStreamWaitValue32` on that word.
    WaitValue {
        stream: usize,
        buffer: usize,
        offset: u8,
    },
    /// The host thread of the next host-side steps.
    Thread {
        thread: usize,
    },
    /// Thread `thread` learns what the other has waited for (a lock or join the shim cannot see).
    ThreadSync {
        thread: usize,
    },
    Capture {
        origin: usize,
        fork: usize,
        items: Vec<Item>,
    },
    Launch {
        graph: usize,
        stream: usize,
    },
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        6 => (0..2usize, 0..BUFFERS, 0..2u8, 0..MODES).prop_map(|(lane, buffer, offset, mode)| Item::Node { lane, buffer, offset, mode }),
        2 => Just(Item::ForkSync),
        2 => Just(Item::JoinSync),
    ]
}

fn access() -> impl Strategy<Value = Step> {
    (0..STREAMS, 0..BUFFERS, 0..4u8, 1..3u8, 0..MODES, 0..3u8)
        .prop_map(|(stream, buffer, offset, len, mode, host)| Step::Access { stream, buffer, offset, len, mode, host })
}

fn capture_step() -> impl Strategy<Value = Step> {
    (0..4usize, 0..4usize, prop::collection::vec(item(), 1..8))
        .prop_filter("two different streams", |(o, f, _)| o != f)
        .prop_map(|(o, f, items)| Step::Capture { origin: CAPTURABLE[o], fork: CAPTURABLE[f], items })
}

fn launch_step() -> impl Strategy<Value = Step> {
    (0..3usize, 0..STREAMS).prop_map(|(graph, stream)| Step::Launch { graph, stream })
}

/// Programs that start with every buffer allocated.
fn program(steps: impl Strategy<Value = Step>, len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(steps, len).prop_map(|steps| {
        let mut program: Vec<Step> = (0..BUFFERS).map(|buffer| Step::AllocSync { buffer }).collect();
        // The second thread starts after the allocations (creating it orders it after them).
        program.push(Step::ThreadSync { thread: 1 });
        program.extend(steps);
        program
    })
}

/// Mostly captures and launches, a few accesses and synchronizations between them.
fn graph_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => capture_step(),
        4 => launch_step(),
        2 => access(),
        1 => (0..STREAMS).prop_map(|stream| Step::StreamSync { stream }),
        1 => (0..EVENTS, 0..STREAMS).prop_map(|(event, stream)| Step::Record { event, stream }),
        1 => (0..STREAMS, 0..EVENTS).prop_map(|(stream, event)| Step::Wait { stream, event }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => access(),
        3 => (0..STREAMS, 0..BUFFERS).prop_map(|(stream, buffer)| Step::AllocAsync { stream, buffer }),
        1 => (0..BUFFERS).prop_map(|buffer| Step::AllocSync { buffer }),
        3 => (0..STREAMS, 0..BUFFERS).prop_map(|(stream, buffer)| Step::FreeAsync { stream, buffer }),
        1 => (0..BUFFERS).prop_map(|buffer| Step::FreeSync { buffer }),
        4 => (0..EVENTS, 0..STREAMS).prop_map(|(event, stream)| Step::Record { event, stream }),
        4 => (0..STREAMS, 0..EVENTS).prop_map(|(stream, event)| Step::Wait { stream, event }),
        1 => (0..EVENTS).prop_map(|event| Step::EventSync { event }),
        1 => (0..EVENTS).prop_map(|event| Step::EventRecreate { event }),
        1 => (0..STREAMS).prop_map(|stream| Step::StreamSync { stream }),
        1 => (0..CAPTURABLE.len()).prop_map(|i| Step::StreamRecreate { stream: CAPTURABLE[i] }),
        1 => (0..2usize).prop_map(|ctx| Step::CtxSync { ctx }),
        1 => (0..STREAMS).prop_map(|stream| Step::HostFunc { stream }),
        2 => (0..STREAMS, 0..BUFFERS, 0..4u8).prop_map(|(stream, buffer, offset)| Step::WriteValue { stream, buffer, offset }),
        2 => (0..STREAMS, 0..BUFFERS, 0..4u8).prop_map(|(stream, buffer, offset)| Step::WaitValue { stream, buffer, offset }),
        2 => (0..2usize).prop_map(|thread| Step::Thread { thread }),
        1 => (0..2usize).prop_map(|thread| Step::ThreadSync { thread }),
        1 => capture_step(),
        2 => launch_step(),
    ]
}

// ---- The oracle ---------------------------------------------------------------------------

/// A node of the happens-before graph: one operation.
struct OpNode {
    ancestors: Vec<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BufferState {
    Never,
    Live { alloc: usize, async_alloc: bool, ctx: u64 },
    Freed { free: usize },
}

#[derive(Clone, Copy)]
struct PastAccess {
    op: usize,
    lo: u64,
    hi: u64,
    mode: Mode,
}

/// How an access is drawn: its mode, and for a kernel's pointer the kernel and the slot.
#[derive(Clone, Copy)]
struct Kind {
    mode: Mode,
    kernel: Option<KernelId>,
    slot: Option<u32>,
}

const MODES: u8 = 5;

/// 0 read, 1 write (copies, memsets, typed kernels); 2 to 4 untyped pointers: kernel 0
/// through slots 0 and 8, kernel 1 through slot 0.
fn kind_of(code: u8) -> Kind {
    let untyped = |kernel, slot| Kind { mode: Mode::Unknown, kernel: Some(KernelId(kernel)), slot: Some(slot) };
    match code {
        0 => Kind { mode: Mode::Read, kernel: None, slot: None },
        1 => Kind { mode: Mode::Write, kernel: None, slot: None },
        2 => untyped(0, 0),
        3 => untyped(0, 8),
        _ => untyped(1, 0),
    }
}

fn model_access(lo: u64, len: u64, kind: Kind) -> Access {
    Access { slot: kind.slot, ..Access::new(lo, len, kind.mode) }
}

/// The conflict of `docs/semantics.md#accesses-and-races`, with unknown accesses (`Mode::conflicts_with`) written out again.
fn conflict(a: Mode, b: Mode) -> bool {
    let writes = |m: Mode| m != Mode::Read;
    (writes(a) || writes(b)) && !(a == Mode::Unknown && b == Mode::Unknown)
}

/// A captured graph as the oracle sees it: nodes with their lanes and dependencies.
#[derive(Clone)]
struct OracleGraph {
    nodes: Vec<(usize, Vec<usize>, usize, u8, u8)>, // (lane, deps, buffer, offset, mode)
}

#[derive(Default)]
struct Oracle {
    ops: Vec<OpNode>,
    /// Per stream, the op that later work on it follows.
    last: HashMap<usize, usize>,
    /// Destroyed streams (by the index their handle has) and their last ops: the legacy
    /// stream and a device-wide synchronization still wait for them.
    destroyed: Vec<(usize, usize)>,
    /// Per host thread, the ops it has waited for.
    host: [BTreeSet<usize>; 2],
    /// The host thread of host-side steps.
    thread: usize,
    /// The first op a thread issued knowing less than the other had waited for: from there
    /// the model's single host clock orders more than the program does, and may rightly miss
    /// races.
    diverged_at: Option<usize>,
    /// Per address, the last value write (for value waits).
    values: HashMap<u64, usize>,
    events: HashMap<usize, usize>,
    buffers: HashMap<usize, BufferState>,
    accesses: HashMap<usize, Vec<PastAccess>>,
    graphs: Vec<OracleGraph>,
    /// Per graph, the end of its last launch (which the next launch follows, even when the
    /// graph has no nodes: "each launch is ordered behind any previous launch").
    last_launch: HashMap<usize, usize>,
    /// (kernel, slot) pairs seen given never-touched bytes: outputs (model::direction).
    outputs: HashSet<(KernelId, u32)>,
    /// Per op that is the second of a race: (buffer, kinds).
    verdicts: BTreeMap<usize, (usize, BTreeSet<RaceKind>)>,
}

impl Oracle {
    fn new_op(&mut self, preds: &[usize]) -> usize {
        let id = self.ops.len();
        let words = id / 64 + 1;
        let mut ancestors = vec![0u64; words];
        for &p in preds {
            ancestors[p / 64] |= 1 << (p % 64);
            for (w, a) in self.ops[p].ancestors.iter().enumerate() {
                ancestors[w] |= a;
            }
        }
        self.ops.push(OpNode { ancestors });
        id
    }

    fn hb(&self, a: usize, b: usize) -> bool {
        a == b || self.ops[b].ancestors.get(a / 64).is_some_and(|w| w & (1 << (a % 64)) != 0)
    }

    /// The host thread that issues on `stream`: a per-thread default stream's own thread,
    /// else the current one.
    fn issuer(&self, stream: usize) -> usize {
        match stream {
            2 => 0,
            3 => 1,
            _ => self.thread,
        }
    }

    /// The predecessors of an op issued on `stream` (issue rule and default streams).
    fn issue_preds(&mut self, stream: usize) -> Vec<usize> {
        let thread = self.issuer(stream);
        if !self.host[1 - thread].is_subset(&self.host[thread]) {
            self.diverged_at.get_or_insert(self.ops.len());
        }
        let mut preds: Vec<usize> = self.host[thread].iter().copied().collect();
        if let Some(&l) = self.last.get(&stream) {
            preds.push(l);
        }
        let ctx = stream_ctx(stream);
        let legacy = if ctx == CTX[0] { 0 } else { 1 };
        if is_legacy(stream) {
            for s in (0..STREAMS).filter(|&s| blocking(s) && stream_ctx(s) == ctx) {
                if let Some(&l) = self.last.get(&s) {
                    preds.push(l);
                }
            }
            preds.extend(self.destroyed.iter().filter(|&&(s, _)| blocking(s) && stream_ctx(s) == ctx).map(|&(_, l)| l));
        } else if blocking(stream) {
            if let Some(&l) = self.last.get(&legacy) {
                preds.push(l);
            }
        }
        preds
    }

    fn issue(&mut self, stream: usize, extra: &[usize]) -> usize {
        let mut preds = self.issue_preds(stream);
        preds.extend_from_slice(extra);
        let op = self.new_op(&preds);
        self.last.insert(stream, op);
        op
    }

    /// The current host thread waits for `op`.
    fn host_waits(&mut self, op: usize) {
        self.host[self.thread].insert(op);
    }

    /// The predecessors of a host-side operation of the current thread.
    fn host_preds(&mut self) -> Vec<usize> {
        if !self.host[1 - self.thread].is_subset(&self.host[self.thread]) {
            self.diverged_at.get_or_insert(self.ops.len());
        }
        self.host[self.thread].iter().copied().collect()
    }

    /// A device-wide synchronization: every stream of `ctx`, destroyed ones too.
    fn host_waits_for_context(&mut self, ctx: u64) {
        let mut waited: Vec<usize> =
            (0..STREAMS).filter(|&s| stream_ctx(s) == ctx).filter_map(|s| self.last.get(&s).copied()).collect();
        waited.extend(self.destroyed.iter().filter(|&&(s, _)| stream_ctx(s) == ctx).map(|&(_, l)| l));
        self.destroyed.retain(|&(s, _)| stream_ctx(s) != ctx);
        self.host[self.thread].extend(waited);
    }

    fn found(&mut self, op: usize, buffer: usize, kind: RaceKind) {
        self.verdicts.entry(op).or_insert_with(|| (buffer, BTreeSet::new())).1.insert(kind);
    }

    fn access(&mut self, op: usize, buffer: usize, lo: u64, hi: u64, kind: Kind) {
        match self.buffers.get(&buffer).copied().unwrap_or(BufferState::Never) {
            BufferState::Never => {}
            BufferState::Freed { .. } => self.found(op, buffer, RaceKind::UseAfterFree),
            BufferState::Live { alloc, async_alloc, .. } => {
                if async_alloc && !self.hb(alloc, op) {
                    self.found(op, buffer, RaceKind::UseBeforeAlloc);
                }
                let host_written = written_by_the_host(buffer, async_alloc);
                let past = self.accesses.get(&buffer).cloned().unwrap_or_default();
                let overlapping = |p: &&PastAccess| p.lo < hi && lo < p.hi;
                // The first access to never-touched device bytes writes them, and makes its
                // kernel's slot an output.
                let key = kind.kernel.zip(kind.slot);
                let mode = match kind.mode {
                    Mode::Unknown if key.is_some_and(|k| self.outputs.contains(&k)) => Mode::ReadWrite,
                    Mode::Unknown if !host_written && !past.iter().any(|p| overlapping(&p)) => {
                        self.outputs.extend(key);
                        Mode::Write
                    }
                    mode => mode,
                };
                if past.iter().filter(overlapping).any(|p| conflict(p.mode, mode) && !self.hb(p.op, op)) {
                    self.found(op, buffer, RaceKind::CrossStream);
                }
                self.accesses.entry(buffer).or_default().push(PastAccess { op, lo, hi, mode });
            }
        }
    }

    fn free(&mut self, op: usize, buffer: usize) {
        if let Some(BufferState::Live { alloc, async_alloc, .. }) = self.buffers.get(&buffer).copied() {
            if async_alloc && !self.hb(alloc, op) {
                self.found(op, buffer, RaceKind::UseBeforeAlloc);
            }
            let past = self.accesses.remove(&buffer).unwrap_or_default();
            if past.iter().any(|p| !self.hb(p.op, op)) {
                self.found(op, buffer, RaceKind::FreeRace);
            }
            // Freed host memory is the system allocator's again: ordinary memory, not a freed
            // buffer (docs/semantics.md#allocation-and-free).
            let freed = if buffer == 1 && !async_alloc { BufferState::Never } else { BufferState::Freed { free: op } };
            self.buffers.insert(buffer, freed);
        }
    }

    fn alloc(&mut self, op: usize, buffer: usize, async_alloc: bool, ctx: u64) {
        self.buffers.insert(buffer, BufferState::Live { alloc: op, async_alloc, ctx });
        self.accesses.remove(&buffer);
    }
}

// ---- Running a program on both ---------------------------------------------------------

#[derive(Default)]
struct Collected(Mutex<Vec<RaceEntry>>);

struct CollectingSink(Arc<Collected>);

impl Sink for CollectingSink {
    fn race(&self, entry: &RaceEntry) {
        self.0 .0.lock().unwrap().push(*entry);
    }
}

/// The op index of a host-side call of `thread`, carried through the stack id.
fn host_origin(op: usize, thread: usize) -> Origin {
    Origin { api: "step", thread: ThreadId(thread as u32 + 1), site: StackId(op as u32 + 1) }
}

/// The op index of each model call, carried through the stack id.
fn origin(op: usize, stream: usize) -> Origin {
    let thread = match stream {
        3 => ThreadId(2),
        _ => ThreadId(1),
    };
    Origin { api: "step", thread, site: StackId(op as u32 + 1) }
}

fn describe(handle: u64) -> Option<StreamInfo> {
    let i = (handle - 0x100) as usize;
    Some(StreamInfo { ctx: stream_ctx(i), non_blocking: !blocking(i) })
}

/// Runs `steps` on the model and the oracle; returns the oracle and the model's races as
/// (second op, buffer index, kind).
fn run(steps: &[Step]) -> (Oracle, Vec<(usize, usize, RaceKind, usize)>) {
    let collected = Arc::new(Collected::default());
    let model = Model::new(Box::new(describe), Some(Box::new(CollectingSink(collected.clone()))));
    let mut oracle = Oracle::default();
    for s in 4..STREAMS {
        let handle = 0x100 + s as u64;
        model.stream_created(handle, stream_ctx(s), !blocking(s), &origin(0, s));
    }
    // Handles of captured graphs, and whether each graph's forked stream was joined.
    let mut graphs = 0usize;
    for step in steps {
        match *step {
            Step::Access { stream, buffer, offset, len, mode, host } => {
                let lo = buffer_base(buffer) + offset as u64 * 8;
                let hi = lo + len as u64 * 8;
                let host_effect =
                    [HostEffect::None, HostEffect::WaitsForEarlierWork, HostEffect::WaitsForOperation][host as usize];
                // A synchronous copy makes its issuing thread wait.
                let thread = oracle.issuer(stream);
                if host_effect == HostEffect::WaitsForEarlierWork {
                    if let Some(&l) = oracle.last.get(&stream) {
                        oracle.host[thread].insert(l);
                    }
                }
                let op = oracle.issue(stream, &[]);
                oracle.access(op, buffer, lo, hi, kind_of(mode));
                if host_effect == HostEffect::WaitsForOperation {
                    oracle.host[thread].insert(op);
                }
                let kind = kind_of(mode);
                let access = [model_access(lo, hi - lo, kind)];
                model.work(
                    stream_ref(stream),
                    Work { origin: origin(op, stream), kernel: kind.kernel, accesses: &access, host: host_effect },
                );
            }
            Step::AllocAsync { stream, buffer } => {
                if matches!(oracle.buffers.get(&buffer), Some(BufferState::Live { .. })) {
                    continue;
                }
                let op = oracle.issue(stream, &[]);
                oracle.alloc(op, buffer, true, stream_ctx(stream));
                let alloc = Alloc {
                    base: buffer_base(buffer),
                    size: BUFFER_SIZE,
                    kind: buffer_kind(buffer, true),
                    ctx: stream_ctx(stream),
                };
                model.alloc(alloc, Some(stream_ref(stream)), &origin(op, stream));
            }
            Step::AllocSync { buffer } => {
                if matches!(oracle.buffers.get(&buffer), Some(BufferState::Live { .. })) {
                    continue;
                }
                // A host operation: ordered after what the thread knows, before its later issues.
                let preds = oracle.host_preds();
                let op = oracle.new_op(&preds);
                oracle.host_waits(op);
                oracle.alloc(op, buffer, false, CTX[0]);
                let alloc = Alloc {
                    base: buffer_base(buffer),
                    size: BUFFER_SIZE,
                    kind: buffer_kind(buffer, false),
                    ctx: CTX[0],
                };
                model.alloc(alloc, None, &host_origin(op, oracle.thread));
            }
            Step::FreeAsync { stream, buffer } => {
                if !matches!(oracle.buffers.get(&buffer), Some(BufferState::Live { .. })) {
                    continue;
                }
                let op = oracle.issue(stream, &[]);
                oracle.free(op, buffer);
                model.free(buffer_base(buffer), FreeOn::Stream(stream_ref(stream)), &origin(op, stream));
            }
            Step::FreeSync { buffer } => {
                let Some(BufferState::Live { ctx, .. }) = oracle.buffers.get(&buffer).copied() else { continue };
                // Device-wide: the host waits for every stream of the buffer's context.
                oracle.host_waits_for_context(ctx);
                let preds = oracle.host_preds();
                let op = oracle.new_op(&preds);
                oracle.host_waits(op);
                oracle.free(op, buffer);
                model.free(buffer_base(buffer), FreeOn::Synchronous { ctx: CTX[0] }, &host_origin(op, oracle.thread));
            }
            Step::Record { event, stream } => {
                let op = oracle.issue(stream, &[]);
                oracle.events.insert(event, op);
                model.event_record(0xe0 + event as u64, stream_ref(stream), false, &origin(op, stream));
            }
            Step::Wait { stream, event } => {
                let extra: Vec<usize> = oracle.events.get(&event).copied().into_iter().collect();
                let op = oracle.issue(stream, &extra);
                model.stream_wait_event(stream_ref(stream), 0xe0 + event as u64, &origin(op, stream));
            }
            Step::EventSync { event } => {
                if let Some(&op) = oracle.events.get(&event) {
                    oracle.host_waits(op);
                }
                model.event_synchronized(0xe0 + event as u64);
            }
            Step::EventRecreate { event } => {
                oracle.events.remove(&event);
                model.event_destroyed(0xe0 + event as u64);
            }
            Step::StreamSync { stream } => {
                // The legacy stream's synchronize is an action on it: it waits for the
                // blocking streams first.
                if is_legacy(stream) {
                    let op = oracle.issue(stream, &[]);
                    oracle.host_waits(op);
                } else if let Some(&l) = oracle.last.get(&stream) {
                    oracle.host_waits(l);
                }
                model.stream_synchronized(stream_ref(stream));
            }
            Step::CtxSync { ctx } => {
                oracle.host_waits_for_context(CTX[ctx]);
                model.context_synchronized(CTX[ctx]);
            }
            Step::StreamRecreate { stream } => {
                if let Some(l) = oracle.last.remove(&stream) {
                    oracle.destroyed.push((stream, l));
                }
                let handle = 0x100 + stream as u64;
                // Notes are not compared: any site will do.
                model.stream_destroyed(handle, &origin(0, stream));
                model.stream_created(handle, stream_ctx(stream), !blocking(stream), &origin(0, stream));
            }
            Step::HostFunc { stream } => {
                // The function runs at once: the host is ordered after it.
                let op = oracle.issue(stream, &[]);
                oracle.host_waits(op);
                let callback = model.host_func(stream_ref(stream), &origin(op, stream));
                model.host_func_ran(&callback);
            }
            Step::WriteValue { stream, buffer, offset } => {
                let addr = buffer_base(buffer) + offset as u64 * 8;
                let op = oracle.issue(stream, &[]);
                oracle.access(op, buffer, addr, addr + 4, kind_of(1));
                oracle.values.insert(addr, op);
                model.write_value(stream_ref(stream), addr, 4, &origin(op, stream));
            }
            Step::WaitValue { stream, buffer, offset } => {
                let addr = buffer_base(buffer) + offset as u64 * 8;
                let extra: Vec<usize> = oracle.values.get(&addr).copied().into_iter().collect();
                let op = oracle.issue(stream, &extra);
                model.wait_value(stream_ref(stream), addr, &origin(op, stream));
            }
            Step::Thread { thread } => oracle.thread = thread,
            Step::ThreadSync { thread } => {
                let other = oracle.host[1 - thread].clone();
                oracle.host[thread].extend(other);
            }
            Step::Capture { origin: o, fork, ref items } => {
                if graphs >= 3 {
                    continue;
                }
                let graph = capture(&model, o, fork, items, graphs);
                oracle.graphs.push(graph);
                graphs += 1;
            }
            Step::Launch { graph, stream } => {
                if graph >= oracle.graphs.len() {
                    continue;
                }
                launch(&model, &mut oracle, graph, stream);
            }
        }
    }
    let races = collected
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            let second = e.race.second.op.site.0 as usize - 1;
            let buffer = ((e.race.buffer.base - buffer_base(0)) / 0x10_0000) as usize;
            let first = e.race.first.op.site.0 as usize - 1;
            (second, buffer, e.race.kind, first)
        })
        .collect();
    (oracle, races)
}

/// Captures `items` on `origin` with `fork` joined through events; returns the graph the
/// oracle will launch. Nothing executes now.
fn capture(model: &Model, origin_stream: usize, fork: usize, items: &[Item], index: usize) -> OracleGraph {
    let fork_event = 0xf0 + 2 * index as u64;
    let join_event = fork_event + 1;
    let marker = origin(usize::MAX - 1, origin_stream); // capture-time calls name no op
    model.capture_begin(stream_ref(origin_stream));
    model.event_record(fork_event, stream_ref(origin_stream), false, &marker);
    model.stream_wait_event(stream_ref(fork), fork_event, &marker);
    let mut graph = OracleGraph { nodes: Vec::new() };
    let mut frontier: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for item in items {
        match *item {
            Item::Node { lane, buffer, offset, mode } => {
                let stream = if lane == 0 { origin_stream } else { fork };
                let deps = std::mem::take(&mut frontier[lane]);
                graph.nodes.push((lane, deps, buffer, offset, mode));
                let node = graph.nodes.len() - 1;
                frontier[lane] = vec![node];
                let lo = buffer_base(buffer) + offset as u64 * 8;
                let kind = kind_of(mode);
                // The site carries the node index; launch ops are numbered by the oracle later.
                let node_origin = Origin {
                    api: "node",
                    thread: ThreadId(1),
                    site: StackId(0x8000_0000 | (index as u32) << 16 | node as u32),
                };
                let access = [model_access(lo, 8, kind)];
                model.work(
                    stream_ref(stream),
                    Work { origin: node_origin, kernel: kind.kernel, accesses: &access, host: HostEffect::None },
                );
            }
            Item::ForkSync => {
                let from = frontier[0].clone();
                frontier[1].extend(from);
                model.event_record(fork_event, stream_ref(origin_stream), false, &marker);
                model.stream_wait_event(stream_ref(fork), fork_event, &marker);
            }
            Item::JoinSync => {
                let from = frontier[1].clone();
                frontier[0].extend(from);
                model.event_record(join_event, stream_ref(fork), false, &marker);
                model.stream_wait_event(stream_ref(origin_stream), join_event, &marker);
            }
        }
    }
    model.event_record(join_event, stream_ref(fork), false, &marker);
    model.stream_wait_event(stream_ref(origin_stream), join_event, &marker);
    let graph_handle = 0x6000 + index as u64;
    model.capture_end(stream_ref(origin_stream), Some(graph_handle));
    model.graph_instantiated(0x7000 + index as u64, graph_handle);
    graph
}

/// The node ops of each launch, by (graph, node) -> oracle op, so that model reports (which
/// name the capture-time node) can be mapped to the launch's op.
type LaunchOps = HashMap<(usize, usize), Vec<usize>>;

thread_local! {
    static LAUNCH_OPS: std::cell::RefCell<LaunchOps> = std::cell::RefCell::new(HashMap::new());
}

fn launch(model: &Model, oracle: &mut Oracle, graph: usize, stream: usize) {
    let launch_op = oracle.issue(stream, &[]);
    let previous: Vec<usize> = oracle.last_launch.get(&graph).copied().into_iter().collect();
    let g = oracle.graphs[graph].clone();
    let mut instances = Vec::new();
    for (node, (_, deps, buffer, offset, mode)) in g.nodes.iter().enumerate() {
        let mut preds = vec![launch_op];
        preds.extend(previous.iter().copied());
        preds.extend(deps.iter().map(|&d| instances[d]));
        let op = oracle.new_op(&preds);
        let lo = buffer_base(*buffer) + *offset as u64 * 8;
        oracle.access(op, *buffer, lo, lo + 8, kind_of(*mode));
        instances.push(op);
        LAUNCH_OPS.with(|l| l.borrow_mut().entry((graph, node)).or_default().push(op));
    }
    let mut end_preds = vec![launch_op];
    end_preds.extend(previous.iter().copied());
    end_preds.extend(instances.iter().copied());
    let end = oracle.new_op(&end_preds);
    oracle.last.insert(stream, end);
    oracle.last_launch.insert(graph, end);
    model.graph_launch(0x7000 + graph as u64, stream_ref(stream), &origin(launch_op, stream));
}

/// Maps a model race's op (a step op, or a graph node at capture) to the oracle ops it may
/// stand for.
fn oracle_ops(site: usize) -> Vec<usize> {
    let site = site + 1;
    if site & 0x8000_0000 != 0 {
        let graph = (site >> 16) & 0x7fff;
        let node = site & 0xffff;
        LAUNCH_OPS.with(|l| l.borrow().get(&(graph, node)).cloned().unwrap_or_default())
    } else {
        vec![site - 1]
    }
}

fn check(steps: &[Step]) -> Result<(), TestCaseError> {
    LAUNCH_OPS.with(|l| l.borrow_mut().clear());
    let (oracle, races) = run(steps);
    // Model reports, as (oracle op, kind), on each buffer.
    let mut reported: BTreeMap<usize, BTreeMap<usize, BTreeSet<RaceKind>>> = BTreeMap::new();
    for &(second, buffer, kind, _first) in &races {
        let ops = oracle_ops(second);
        // A report about a graph node: it must hold for one of the node's launches.
        let matching: Vec<usize> =
            ops.iter().copied().filter(|op| oracle.verdicts.get(op).is_some_and(|(_, k)| k.contains(&kind))).collect();
        prop_assert!(!matching.is_empty(), "model reported {kind:?} on buffer {buffer} at op(s) {ops:?}, the oracle did not\nsteps: {steps:#?}\noracle: {:?}", oracle.verdicts);
        // Races are counted once per pair of call sites, and a graph node's launches share
        // its site: one report stands for each of them that races so.
        for op in matching {
            reported.entry(buffer).or_default().entry(op).or_default().insert(kind);
        }
    }
    // Every race of the oracle, first on its buffer or not, is reported with exactly its kinds.
    for (&op, &(buffer, ref kinds)) in &oracle.verdicts {
        // Once one thread's knowledge is behind the other's, the model (one host clock) may
        // rightly miss races: from there only that its reports are real is checked.
        if oracle.diverged_at.is_some_and(|d| op >= d) {
            continue;
        }
        let got = reported.get(&buffer).and_then(|r| r.get(&op));
        prop_assert!(got == Some(kinds), "buffer {buffer}: race at op {op} is {kinds:?}, model reported {got:?}\nsteps: {steps:#?}\nmodel: {races:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20000, max_shrink_iters: 20000, ..ProptestConfig::default() })]

    #[test]
    fn model_agrees_with_the_happens_before_oracle(steps in program(step(), 1..40)) {
        check(&steps)?;
    }

    #[test]
    fn graph_launches_agree_with_the_oracle(steps in program(graph_step(), 1..16)) {
        check(&steps)?;
    }
}

/// The generators make programs with races, and races on graph nodes, often enough for the
/// properties above to mean something.
#[test]
fn generated_programs_exercise_races_and_graphs() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut with_race, mut with_node_race, mut checked_whole, mut checked_after_first, total) = (0, 0, 0, 0, 400);
    for strategy in [program(step(), 1..40).boxed(), program(graph_step(), 1..16).boxed()] {
        for _ in 0..total / 2 {
            let steps = strategy.new_tree(&mut runner).unwrap().current();
            LAUNCH_OPS.with(|l| l.borrow_mut().clear());
            let (oracle, races) = run(&steps);
            with_race += !oracle.verdicts.is_empty() as usize;
            with_node_race += races.iter().any(|r| (r.0 + 1) & 0x8000_0000 != 0) as usize;
            let checked = oracle.verdicts.keys().filter(|&&op| oracle.diverged_at.is_none_or(|d| op < d)).count();
            checked_whole += (checked > 0) as usize;
            checked_after_first += (checked > 1) as usize;
        }
    }
    assert!(with_race > total / 4, "{with_race} of {total} programs race");
    assert!(with_node_race > total / 20, "{with_node_race} of {total} programs race on a graph node");
    // Programs whose first race comes while the threads are in step, where it is checked.
    assert!(
        checked_whole > total / 5,
        "{checked_whole} of {total} programs have a first race checked for completeness"
    );
    // Programs where races after the first are checked too.
    assert!(
        checked_after_first > total / 20,
        "{checked_after_first} of {total} programs have more than one race checked for completeness"
    );
}

/// Fixed programs the property test once found wrong, kept as regressions.
#[test]
fn legacy_stream_orders_blocking_streams_both_ways() {
    // A write on the legacy stream, a read on a blocking stream (ordered), a write on a
    // non-blocking stream (not ordered with either).
    let steps = vec![
        Step::AllocAsync { stream: 4, buffer: 0 },
        Step::Access { stream: 0, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::Access { stream: 4, buffer: 0, offset: 0, len: 1, mode: 0, host: 0 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    // Only the non-blocking stream's write races (ops: alloc 0, write 1, read 2, write 3).
    assert_eq!(oracle.verdicts.keys().copied().collect::<Vec<_>>(), vec![3]);
    assert!(races.iter().all(|r| r.0 == 3) && !races.is_empty());
}

#[test]
fn launches_of_an_empty_graph_still_order_each_other() {
    // Found by the property test: an executable graph with no nodes, launched after a write on
    // one stream and again on another, still orders the second stream after the write.
    let steps = vec![
        Step::AllocSync { buffer: 0 },
        Step::Capture { origin: 5, fork: 4, items: vec![Item::ForkSync] },
        Step::Capture { origin: 5, fork: 4, items: vec![Item::Node { lane: 0, buffer: 0, offset: 0, mode: 0 }] },
        Step::Access { stream: 2, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::Launch { graph: 0, stream: 0 },
        Step::Launch { graph: 0, stream: 7 },
        Step::Launch { graph: 1, stream: 7 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    assert!(oracle.verdicts.is_empty() && races.is_empty(), "{:?} {races:?}", oracle.verdicts);
}

#[test]
fn a_recreated_event_handle_orders_nothing_until_recorded() {
    // A write on one stream, recorded in an event; the event destroyed and its handle made
    // again; another stream waits on it (a wait on an unrecorded event) and reads: a race.
    let steps = vec![
        Step::AllocSync { buffer: 0 },
        Step::Access { stream: 4, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::Record { event: 0, stream: 4 },
        Step::EventRecreate { event: 0 },
        Step::Wait { stream: 5, event: 0 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 0, host: 0 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    assert!(!oracle.verdicts.is_empty() && !races.is_empty(), "{:?} {races:?}", oracle.verdicts);
}

/// A graph or executable graph handle, once destroyed, names nothing the model followed: a
/// graph the driver later makes at the same address (with the explicit graph API, which the
/// model does not follow) runs unchecked, with a note, not as the old captured graph.
#[test]
fn a_destroyed_graph_or_executable_graph_is_forgotten() {
    let model = Model::new(Box::new(describe), None);
    let s = stream_ref(5);
    model.stream_created(0x105, CTX[0], true, &origin(0, 5));
    let access = [Access::new(buffer_base(0), 8, Mode::Write)];
    let capture = |graph: u64| {
        model.capture_begin(s);
        model.work(s, Work { origin: origin(1, 5), kernel: None, accesses: &access, host: HostEffect::None });
        model.capture_end(s, Some(graph));
    };
    let not_followed = || model.notes().iter().filter(|n| n.kind == NoteKind::GraphNotFollowed).count();

    capture(0x6000);
    model.graph_destroyed(0x6000);
    model.graph_instantiated(0x7000, 0x6000);
    model.graph_launch(0x7000, s, &origin(2, 5));
    assert_eq!(not_followed(), 1, "an executable of a destroyed graph handle");

    capture(0x6001);
    model.graph_instantiated(0x7001, 0x6001);
    model.exec_destroyed(0x7001);
    model.graph_launch(0x7001, s, &origin(3, 5));
    assert_eq!(not_followed(), 2, "a destroyed executable graph handle");
}

#[test]
fn a_stream_on_a_reused_slot_continues_its_times() {
    // A write on stream 5, which the host then waits for; the stream destroyed and made
    // again (its slot free to reuse); the new stream writes, and so does stream 7, unordered
    // with it: a race. Were the new stream's times to start over, its write would look
    // ordered before everything that follows the host.
    let steps = vec![
        Step::AllocSync { buffer: 0 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::StreamSync { stream: 5 },
        Step::StreamRecreate { stream: 5 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::Access { stream: 7, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    assert_eq!(oracle.verdicts.keys().copied().collect::<Vec<_>>(), vec![3], "only stream 7's write races");
    assert!(!races.is_empty() && races.iter().all(|r| r.0 == 3), "{races:?}");
}

#[test]
fn a_destroyed_blocking_stream_still_orders_the_legacy_stream_after_what_it_waited_for() {
    // A write on non-blocking stream 5, recorded; blocking stream 4 waits on it and reads
    // another buffer, and is destroyed with that work pending; the legacy stream's read of
    // the first buffer follows stream 4's work, and so the write: no race. (A destroyed
    // stream's clock is shortened to what a synchronization of its context needs, but the
    // legacy stream joins a blocking stream's whole clock.)
    let steps = vec![
        Step::AllocSync { buffer: 0 },
        Step::AllocSync { buffer: 1 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::Record { event: 0, stream: 5 },
        Step::Wait { stream: 4, event: 0 },
        Step::Access { stream: 4, buffer: 1, offset: 0, len: 1, mode: 0, host: 0 },
        Step::StreamRecreate { stream: 4 },
        Step::Access { stream: 0, buffer: 0, offset: 0, len: 1, mode: 0, host: 0 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    assert!(oracle.verdicts.is_empty() && races.is_empty(), "{:?} {races:?}", oracle.verdicts);
}

#[test]
fn a_recreated_stream_does_not_inherit_the_old_ones_order() {
    // A write on stream 5 that nothing waits for; the stream destroyed and made again; the
    // new stream records an event that stream 7 waits on before it writes: the write races
    // with the old stream's, which the new one is not ordered after.
    let steps = vec![
        Step::AllocSync { buffer: 0 },
        Step::Access { stream: 5, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
        Step::StreamRecreate { stream: 5 },
        Step::Record { event: 0, stream: 5 },
        Step::Wait { stream: 7, event: 0 },
        Step::Access { stream: 7, buffer: 0, offset: 0, len: 1, mode: 1, host: 0 },
    ];
    check(&steps).unwrap();
    let (oracle, races) = run(&steps);
    assert!(!oracle.verdicts.is_empty() && !races.is_empty(), "{:?} {races:?}", oracle.verdicts);
}

#[test]
fn a_graph_lane_takes_a_destroyed_graphs_slot_only_when_ordered_after_it() {
    let collected = Arc::new(Collected::default());
    let model = Model::new(Box::new(describe), Some(Box::new(CollectingSink(collected.clone()))));
    let (s, t) = (stream_ref(5), stream_ref(7));
    for i in [5, 7] {
        model.stream_created(0x100 + i as u64, stream_ctx(i), true, &origin(0, i));
    }
    model.alloc(
        Alloc { base: buffer_base(0), size: BUFFER_SIZE, kind: MemoryKind::Device, ctx: CTX[0] },
        None,
        &origin(0, 0),
    );
    // A graph that writes the buffer, captured, launched on `on` and destroyed; `site`
    // names its node.
    let graph_writes = |exec: u64, on: StreamRef, site: usize| {
        model.capture_begin(on);
        let access = [Access::new(buffer_base(0), 8, Mode::Write)];
        model.work(on, Work { origin: origin(site, 0), kernel: None, accesses: &access, host: HostEffect::None });
        model.capture_end(on, Some(exec));
        model.graph_instantiated(exec, exec);
        model.graph_launch(exec, on, &origin(site + 100, 0));
        model.exec_destroyed(exec);
        model.graph_destroyed(exec);
    };
    graph_writes(1, s, 1);
    // Launched again on the same stream: ordered after the first (which it may take the
    // lane of): no race.
    graph_writes(2, s, 2);
    assert!(collected.0.lock().unwrap().is_empty(), "one stream's graphs are ordered");
    // On a stream not ordered after them: the node's write races with theirs.
    graph_writes(3, t, 3);
    let races = collected.0.lock().unwrap();
    assert!(
        races.iter().any(|r| r.race.kind == RaceKind::CrossStream && r.race.second.op.site == StackId(4)),
        "{races:?}"
    );
}

/// A caching allocator puts hundreds of tensors in one driver allocation: the default
/// stream's traffic on other tensors of it must not push out of the history what a side
/// stream did, or the race with that side stream is lost.
#[test]
fn a_side_streams_access_outlives_the_main_streams_traffic_on_the_same_buffer() {
    let model = Model::new(Box::new(describe), Some(Box::new(CollectingSink(Arc::new(Collected::default())))));
    let (main, side) = (stream_ref(4), stream_ref(5));
    for s in [4, 5] {
        model.stream_created(0x100 + s as u64, stream_ctx(s), !blocking(s), &origin(0, s));
    }
    let segment = Alloc { base: buffer_base(0), size: BUFFER_SIZE, kind: MemoryKind::Device, ctx: CTX[0] };
    model.alloc(segment, None, &host_origin(0, 0));
    let launch = |stream, site: usize, lo: u64, mode| {
        let access = [Access::new(buffer_base(0) + lo, 1, mode)];
        model.work(stream, Work { origin: origin(site, 4), kernel: None, accesses: &access, host: HostEffect::None });
    };
    // The side stream reads the tensor at 0; the main stream then works on 200 others...
    launch(side, 1, 0, Mode::Read);
    for t in 1..200u64 {
        launch(main, 1 + t as usize, t, if t % 2 == 0 { Mode::Read } else { Mode::Write });
    }
    // ...and reuses the first one's memory without waiting for the side stream.
    launch(main, 500, 0, Mode::Write);
    let races = model.races();
    assert!(
        races.iter().any(|r| r.race.kind == RaceKind::CrossStream && r.race.second.op.site == StackId(501)),
        "{races:?}"
    );
}
