//! The happens-before model: what CUDA orders with what, and the races it leaves open.
//!
//! The shim tells the model, call by call, what the program did: an operation issued on a
//! stream (with the memory it touches), an allocation or a free, an event recorded or waited
//! on, a synchronization, a capture, a graph launch. The model keeps a vector clock per
//! stream and one for the host, an access history per buffer and the captured graphs, and
//! decides at each operation whether it is ordered after everything it must follow. What it
//! finds goes to [`race::Races`], deduplicated by call sites, and to the [`Sink`] as soon as
//! it is new. `docs/semantics.md` says, rule by rule, what the model implements.
//!
//! # Map
//!
//! The rules, one file each under `rules/`, each adding to `impl Model`:
//!
//! | file | rule |
//! |---|---|
//! | `rules/issue.rs` | how an operation is issued on a stream: the host's and the legacy stream's clocks joined, the stream's slot ticked; or, while the stream captures, a node instead |
//! | `rules/work.rs` | kernels, copies, memsets: each access checked against its buffer's allocation, history and free |
//! | `rules/memory.rs` | allocations and frees, stream-ordered and synchronous: use before allocation, free-races |
//! | `rules/sync.rs` | events, stream and context synchronization, host functions, stream memory operations |
//! | `rules/lifetime.rs` | streams and contexts created and destroyed |
//! | `rules/graphs.rs` | stream capture, and graph launches that replay the captured nodes |
//! | `rules/built.rs` | graphs built with the explicit graph API: nodes, edges, parameters, updates |
//! | `rules/ipc.rs` | memory and events shared with other processes through CUDA IPC: accesses exchanged, IPC events' records carried across |
//! | `rules/footprint_late.rs` | a measured launch (`footprint=exact\|learn`), issued at once and checked when its footprint arrives, against what was issued before and after it |
//! | `rules/graph_footprints.rs` | measured kernel nodes of graph launches: which a launch measures, what each node's last measurement showed |
//! | `rules/footprint_learning.rs` | `footprint=learn`: a measured launch learnt from, learnt extents applied at issue to later launches with the same key |
//! | [`host_races`] | host races: whether the host has joined a copy in flight, and the race when it touched the copy's bytes first |
//! | `queries.rs` | what the shim and the report ask: kernel names, memory kinds, findings so far |
//!
//! What the rules keep, one data structure each:
//!
//! | file | holds |
//! |---|---|
//! | [`clock`] | vector clocks, epochs, the host's clock |
//! | [`streams`] | streams and contexts, default streams, the slots of the clocks |
//! | [`footprint`] | measured footprints: what a launch touched, launches waiting for it, what was learnt |
//! | [`buffers`], [`shadow`] | live and freed buffers by address, each one's access history |
//! | [`events`] | what each event's last record captured |
//! | [`peers`] | other processes sharing memory and events: their streams' slots, what their accesses knew, the exchange with them |
//! | [`capture`] | captures in progress, executable graphs |
//! | [`definition`] | graph definitions, captured or built with the explicit graph API |
//! | [`direction`] | the parameter slots of untyped kernels learnt to be outputs |
//! | [`op`] | the vocabulary of a call: origin, access, mode |
//! | [`race`] | races and notes, deduplicated |
//! | [`lock`] | the spin lock of streams, buffers and events |
//!
//! Locks: at most one stream lock is held at a time; under a stream lock the model may take
//! a buffer's or an event's lock, never the reverse.

pub mod buffers;
pub mod capture;
pub mod clock;
pub mod definition;
pub mod direction;
pub mod events;
pub mod footprint;
pub mod host_races;
pub mod lock;
pub mod op;
pub mod peers;
mod queries;
pub mod race;
pub mod residue;
mod rules;
pub mod shadow;
pub mod streams;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use crate::hash::{fast_map, FastMap};

use buffers::{BufferMap, MemoryKind};
use capture::Graphs;
use clock::VectorClock;
use direction::Directions;
use events::Events;
use op::{Access, HostEffect, KernelId, Origin};
use race::{Notes, RaceEntry, Races};
use streams::{Host, StreamInfo, StreamRef, Streams};

/// Receives each new race as the model finds it.
pub trait Sink: Send + Sync {
    fn race(&self, entry: &RaceEntry);
}

// The arguments of the entry points ([`Model::work`], [`Model::alloc`], [`Model::free`]).

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

type Describe = dyn Fn(u64) -> Option<StreamInfo> + Send + Sync;

/// Interned kernels: ids by symbol, and (name, symbol) by id.
type Kernels = (HashMap<String, u32>, Vec<(String, String)>);

/// The model of one process: every stream, buffer, event and graph the program made, and
/// the races found among them.
pub struct Model {
    streams: Streams,
    host: Host,
    buffers: BufferMap,
    events: Events,
    graphs: Graphs,
    /// The clock of the last `cuStreamWriteValue` to each address.
    values: FastMap<u64, VectorClock>,
    kernels: Mutex<Kernels>,
    directions: Directions,
    /// Measured launches waiting for their footprint ([`footprint::pending`]).
    pending: footprint::pending::PendingLaunches,
    /// Footprints learnt from measured launches ([`footprint::learnt`]).
    learnt: footprint::learnt::Learnt,
    /// Other processes sharing memory and events through CUDA IPC ([`peers`]).
    peers: peers::Peers,
    races: Races,
    notes: Notes,
    /// The host's accesses to bytes guarded for a measured launch before its footprint was
    /// known ([`host_races`]): races once the footprint says the launch touched them.
    host_unsure: Mutex<Vec<(host_races::DeviceBytes, host_races::HostAccess)>>,
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
            pending: footprint::pending::PendingLaunches::default(),
            learnt: footprint::learnt::Learnt::default(),
            peers: peers::Peers::default(),
            races: Races::default(),
            notes: Notes::default(),
            host_unsure: Mutex::new(Vec::new()),
            next_buffer: AtomicU64::new(1),
            describe,
            sink,
        }
    }
}
