//! Captures in progress and executable graphs: a capturing stream's operations become nodes
//! of a [`Definition`], each depending on its stream's frontier, and each stream that joins
//! the capture is a lane of it (`docs/semantics.md#capture-and-graphs`).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::hash::FastMap;

use super::clock::{Slot, VectorClock};
use super::definition::{Definition, Graph, Node};
use super::op::Access;

/// A stream's part in a capture.
pub struct CaptureLane {
    pub capture: Arc<Capture>,
    pub lane: usize,
    /// The nodes the stream's next operation depends on...
    pub frontier: Vec<usize>,
    /// ...and those of them it depends on through programmatic edges (edge data given with
    /// the dependencies).
    pub programmatic: Vec<usize>,
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
    nodes: Mutex<Definition>,
    /// The graph captured into (`cuStreamBeginCaptureToGraph`), if not a new one.
    pub target: Option<u64>,
    /// The streams that joined, one lane each, in the order they joined.
    members: Mutex<Vec<Arc<dyn Member>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Capture {
    pub fn new() -> Arc<Capture> {
        Capture::into(None, Definition::default())
    }

    /// A capture that adds to `target`'s definition `nodes`.
    pub fn into(target: Option<u64>, nodes: Definition) -> Arc<Capture> {
        Arc::new(Capture { nodes: Mutex::new(nodes), target, members: Mutex::new(Vec::new()) })
    }

    /// Adds a stream to the capture as a new lane; returns the lane.
    pub fn join(&self, stream: Arc<dyn Member>) -> usize {
        let mut members = locked(&self.members);
        members.push(stream);
        members.len() - 1
    }

    /// Appends a node (a captured node's handle is the driver's secret).
    pub fn push(&self, node: Node) -> usize {
        locked(&self.nodes).add(node, None)
    }

    /// Every node so far (what the stream depends on when the program names nodes the model
    /// cannot place).
    pub fn all_nodes(&self) -> Vec<usize> {
        (0..locked(&self.nodes).nodes.len()).collect()
    }

    /// The indices of the capture's nodes with these handles, if all are known.
    pub fn indices_of(&self, handles: &[u64]) -> Option<Vec<usize>> {
        let nodes = locked(&self.nodes);
        handles.iter().map(|&h| nodes.index_of(h)).collect()
    }

    pub fn members(&self) -> Vec<Arc<dyn Member>> {
        locked(&self.members).clone()
    }

    /// The captured graph's definition. The capture is over.
    pub fn finish(&self) -> Definition {
        locked(&self.members).clear();
        std::mem::take(&mut *locked(&self.nodes))
    }
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
    /// Launches so far.
    pub launches: u64,
    /// By node: the launch (counted as `launches`) that last measured it and what it
    /// touched, which stands for its parameters' guess at its unmeasured launches (its
    /// parameters are the executable graph's own: a change of them makes a new [`Exec`]).
    pub measured: Vec<Option<(u64, Arc<[Access]>)>>,
}

/// Graph definitions and executable graphs by handle, the graph of each node handle, and
/// the executable graph, node and launch of each node launch being measured, by ticket.
#[derive(Default)]
pub struct Graphs {
    pub graphs: FastMap<u64, Arc<Mutex<Definition>>>,
    pub node_graphs: FastMap<u64, u64>,
    pub execs: FastMap<u64, Arc<Exec>>,
    pub measuring: FastMap<u64, (Weak<Exec>, usize, u64)>,
}
