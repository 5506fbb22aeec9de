//! Stream capture and graphs.
//!
//! Operations issued to a capturing stream are not executed: they become nodes of the
//! capture, each depending on the stream's *frontier* (its last node, or the nodes it
//! joined through events). A stream that waits on an event recorded in a capture joins the
//! capture as a new *lane*. Nodes of one lane form a chain, so at launch each lane needs
//! only one slot of the vector clocks: a launch gives every node the clock of the launch
//! stream joined with its predecessors' clocks, then ticks its lane
//! (`docs/semantics.md#capture-and-graphs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::hash::FastMap;

use super::clock::{Slot, VectorClock};
use super::op::{Access, KernelId, Origin};

/// A host function (`cuLaunchHostFunc`, `cuStreamAddCallback`): when it runs, the host is
/// ordered after the clock of the operation that enqueued it.
#[derive(Default)]
pub struct HostCallback {
    clock: Mutex<VectorClock>,
    /// Captured into a graph: it runs once per launch, not once.
    captured: AtomicBool,
}

impl HostCallback {
    pub fn captured(&self) -> bool {
        self.captured.load(Ordering::Acquire)
    }

    pub fn mark_captured(&self) {
        self.captured.store(true, Ordering::Release);
    }

    pub fn set(&self, clock: &VectorClock) {
        self.clock.lock().unwrap_or_else(|e| e.into_inner()).assign(clock);
    }

    pub fn clock(&self) -> VectorClock {
        self.clock.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What a node does when the graph runs.
pub enum NodeKind {
    /// A kernel, copy or memset.
    Work { accesses: Vec<Access> },
    /// A memory node allocating `[base, base + size)`.
    Alloc { base: u64, size: u64, ctx: u64 },
    Free { base: u64 },
    /// `cuEventRecordWithFlags(.., CU_EVENT_RECORD_EXTERNAL)` in a capture.
    RecordEvent { event: u64 },
    /// A wait on an event recorded outside the capture.
    WaitEvent { event: u64 },
    HostFunc(Arc<HostCallback>),
    /// Anything else: it orders, touches nothing.
    Empty,
}

pub struct Node {
    pub lane: usize,
    pub deps: Vec<usize>,
    pub kind: NodeKind,
    pub origin: Origin,
    pub kernel: Option<KernelId>,
}

/// A stream's part in a capture.
pub struct CaptureLane {
    pub capture: Arc<Capture>,
    pub lane: usize,
    /// The nodes the stream's next operation depends on.
    pub frontier: Vec<usize>,
}

/// A stream taking part in a capture, as the capture sees it. The capture only needs to end
/// each member's part when it ends; naming streams through this trait keeps this file
/// below `streams.rs`, whose streams hold their [`CaptureLane`].
pub trait Member: Send + Sync {
    /// The capture is over: the member stops capturing, if it still takes part in `capture`.
    fn leave(&self, capture: &Arc<Capture>);
}

/// A capture in progress.
pub struct Capture {
    nodes: Mutex<Vec<Node>>,
    /// Per lane, the slot of the stream that captured it (for reports).
    lanes: Mutex<Vec<Slot>>,
    members: Mutex<Vec<Arc<dyn Member>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Capture {
    pub fn new() -> Arc<Capture> {
        Arc::new(Capture { nodes: Mutex::new(Vec::new()), lanes: Mutex::new(Vec::new()), members: Mutex::new(Vec::new()) })
    }

    /// Adds a stream, whose slot is `slot`, to the capture as a new lane.
    pub fn join(&self, stream: Arc<dyn Member>, slot: Slot) -> usize {
        locked(&self.members).push(stream);
        let mut lanes = locked(&self.lanes);
        lanes.push(slot);
        lanes.len() - 1
    }

    /// Appends a node; nodes only ever depend on earlier ones, so the order is topological.
    pub fn push(&self, node: Node) -> usize {
        let mut nodes = locked(&self.nodes);
        nodes.push(node);
        nodes.len() - 1
    }

    pub fn members(&self) -> Vec<Arc<dyn Member>> {
        locked(&self.members).clone()
    }

    /// The captured graph. The capture is over.
    pub fn finish(&self) -> Graph {
        locked(&self.members).clear();
        Graph { nodes: std::mem::take(&mut *locked(&self.nodes)), lane_streams: locked(&self.lanes).clone() }
    }
}

/// A captured graph.
pub struct Graph {
    pub nodes: Vec<Node>,
    pub lane_streams: Vec<Slot>,
}

/// An executable graph: its lanes' slots (allocated at the first launch) and the clock at
/// the end of its last launch, which the next launch follows.
pub struct Exec {
    pub graph: Arc<Graph>,
    pub state: Mutex<ExecState>,
}

#[derive(Default)]
pub struct ExecState {
    pub lane_slots: Vec<Slot>,
    pub end: VectorClock,
}

/// Graphs and executable graphs by handle.
#[derive(Default)]
pub struct Graphs {
    pub graphs: FastMap<u64, Arc<Graph>>,
    pub execs: FastMap<u64, Arc<Exec>>,
}
