//! Graph definitions, captured or built with the explicit graph API and editable until
//! instantiated; [`Definition::executable`] turns one into an executable [`Graph`] whose
//! lanes, chains of nodes, need one clock slot each (`docs/semantics.md#capture-and-graphs`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::clock::VectorClock;
use super::op::{Access, GridWait, KernelId, Origin};

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

/// A node the program adds to a graph.
pub struct AddedNode<'a> {
    pub graph: u64,
    /// The driver's handle of the new node.
    pub handle: u64,
    /// The handles of the nodes it depends on...
    pub deps: &'a [u64],
    /// ...and, by dependency, whether through a programmatic edge (none where it is empty).
    pub programmatic: &'a [bool],
    pub kind: NodeKind,
    pub origin: Origin,
    pub kernel: Option<KernelId>,
    pub grid_wait: GridWait,
}

/// The dependencies `deps` flagged in `programmatic` (by index; none where it is empty).
pub fn flagged(deps: &[usize], programmatic: &[bool]) -> Vec<usize> {
    deps.iter().zip(programmatic).filter(|(_, &p)| p).map(|(&d, _)| d).collect()
}

/// What a node does when the graph runs.
#[derive(Clone)]
pub enum NodeKind {
    /// A kernel, copy or memset.
    Work {
        accesses: Vec<Access>,
    },
    /// A memory node allocating `[base, base + size)`.
    Alloc {
        base: u64,
        size: u64,
        ctx: u64,
    },
    Free {
        base: u64,
    },
    /// `cuEventRecordWithFlags(.., CU_EVENT_RECORD_EXTERNAL)` in a capture.
    RecordEvent {
        event: u64,
    },
    /// A wait on an event recorded outside the capture.
    WaitEvent {
        event: u64,
    },
    HostFunc(Arc<HostCallback>),
    /// Anything else: it orders, touches nothing.
    Empty,
}

#[derive(Clone)]
pub struct Node {
    /// The driver's `CUgraphNode` handle (0 for a captured node: the model never sees it).
    pub handle: u64,
    /// The chain of nodes it continues ([`Definition::executable`] assigns it).
    pub lane: usize,
    pub deps: Vec<usize>,
    /// Those of `deps` it is reached from through a programmatic edge (programmatic
    /// dependent launch): it may start before they complete.
    pub programmatic: Vec<usize>,
    pub kind: NodeKind,
    pub origin: Origin,
    pub kernel: Option<KernelId>,
    /// A kernel node: whether its kernel's code waits on its grid dependencies.
    pub grid_wait: GridWait,
}

/// An executable graph's nodes, in topological order, in `lanes` chains.
pub struct Graph {
    pub nodes: Vec<Node>,
    pub lanes: usize,
}

/// One node of a definition.
#[derive(Clone)]
pub struct Defined {
    pub node: Node,
    /// A child graph node: a copy of the child graph as it was when the node was added.
    pub child: Option<Arc<Definition>>,
    pub removed: bool,
}

/// A graph's definition.
#[derive(Clone, Default)]
pub struct Definition {
    pub nodes: Vec<Defined>,
    /// A node was added that the model cannot follow.
    pub opaque: bool,
}

impl Definition {
    /// The index of the live node with handle `handle`.
    pub fn index_of(&self, handle: u64) -> Option<usize> {
        (handle != 0).then_some(())?;
        self.nodes.iter().position(|d| d.node.handle == handle && !d.removed)
    }

    /// Adds a node (its `deps` are indices of this definition); returns its index.
    pub fn add(&mut self, node: Node, child: Option<Arc<Definition>>) -> usize {
        self.nodes.push(Defined { node, child, removed: false });
        self.nodes.len() - 1
    }

    /// Names the kernel nodes of this definition (not of its children) with the driver's
    /// handles, `kernels` as the driver lists them (handle and kernel), in the order the
    /// nodes were made: a capture's nodes have no handle the model saw. Only if both lists
    /// agree, kernel by kernel (and on every handle the model knew): whether they did.
    pub fn name_kernels(&mut self, kernels: &[(u64, Option<KernelId>)]) -> bool {
        let ours: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let d = &self.nodes[i];
                !d.removed
                    && d.child.is_none()
                    && d.node.kernel.is_some()
                    && matches!(d.node.kind, NodeKind::Work { .. })
            })
            .collect();
        let agree = ours.len() == kernels.len()
            && ours.iter().zip(kernels).all(|(&i, &(handle, kernel))| {
                let node = &self.nodes[i].node;
                node.kernel == kernel && (node.handle == 0 || node.handle == handle)
            });
        if agree {
            for (&i, &(handle, _)) in ours.iter().zip(kernels) {
                self.nodes[i].node.handle = handle;
            }
        }
        agree
    }

    /// The executable form: children flattened, nodes in topological order, lanes assigned.
    /// `None` if the model cannot follow it.
    pub fn executable(&self) -> Option<Graph> {
        let mut flat = Vec::new();
        if !self.flatten(&mut flat) {
            return None;
        }
        Some(ordered(flat))
    }

    /// Appends this definition's live nodes to `flat`, each child graph node replaced by an
    /// entry node (its dependencies), the child's nodes (after the entry) and an exit node
    /// (after all of them), on which the child node's dependents then depend. Returns false
    /// if a node cannot be followed.
    fn flatten(&self, flat: &mut Vec<Node>) -> bool {
        if self.opaque {
            return false;
        }
        // Where each node starts (its dependencies go there) and ends (its dependents wait
        // for it there) in `flat`; edges may point either way, so they come second.
        let mut span: Vec<Option<(usize, usize)>> = vec![None; self.nodes.len()];
        for (i, defined) in self.nodes.iter().enumerate() {
            if defined.removed {
                continue;
            }
            let node = Node { deps: Vec::new(), programmatic: Vec::new(), ..defined.node.clone() };
            match &defined.child {
                None => {
                    flat.push(node);
                    span[i] = Some((flat.len() - 1, flat.len() - 1));
                }
                Some(child) => {
                    flat.push(Node { kind: NodeKind::Empty, ..node.clone() });
                    let entry = flat.len() - 1;
                    if !child.flatten(flat) {
                        return false;
                    }
                    for n in &mut flat[entry + 1..] {
                        n.deps.push(entry);
                    }
                    let deps = (entry..flat.len()).collect();
                    flat.push(Node { kind: NodeKind::Empty, deps, ..node });
                    span[i] = Some((entry, flat.len() - 1));
                }
            }
        }
        for (i, defined) in self.nodes.iter().enumerate() {
            if let Some((start, _)) = span[i] {
                let end_of = |d: &usize| span.get(*d).copied().flatten().map(|(_, end)| end);
                flat[start].deps.extend(defined.node.deps.iter().filter_map(end_of));
                flat[start].programmatic.extend(defined.node.programmatic.iter().filter_map(end_of));
            }
        }
        true
    }
}

/// Orders `nodes` topologically (an edge may point to a later node: edges are editable),
/// keeping their order where it allows, and
/// assigns lanes: a node continues the lane of one of its dependencies whose lane it can
/// extend (that dependency is still the lane's last node), else it opens a lane.
fn ordered(nodes: Vec<Node>) -> Graph {
    let n = nodes.len();
    let mut dependents = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for (i, node) in nodes.iter().enumerate() {
        for &d in &node.deps {
            dependents[d].push(i);
            waiting[i] += 1;
        }
    }
    // The earliest ready node first: an order that already is topological (a capture's) is kept.
    let mut order = Vec::with_capacity(n);
    let mut ready: BinaryHeap<Reverse<usize>> = (0..n).filter(|&i| waiting[i] == 0).map(Reverse).collect();
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &j in &dependents[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    // A cycle (the driver refuses to instantiate one) leaves nodes out: they never run.
    let mut position = vec![usize::MAX; n];
    for (p, &i) in order.iter().enumerate() {
        position[i] = p;
    }
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    let mut lane_tail: Vec<usize> = Vec::new();
    let mut out: Vec<Node> = Vec::with_capacity(order.len());
    for &i in &order {
        let mut node = slots[i].take().expect("each node once");
        node.deps = node.deps.iter().map(|&d| position[d]).collect();
        node.deps.sort_unstable();
        node.deps.dedup();
        node.programmatic = node.programmatic.iter().map(|&d| position[d]).collect();
        let here = out.len();
        node.lane = match lane_tail.iter().position(|tail| node.deps.contains(tail)) {
            Some(lane) => lane,
            None => {
                lane_tail.push(usize::MAX);
                lane_tail.len() - 1
            }
        };
        lane_tail[node.lane] = here;
        out.push(node);
    }
    Graph { lanes: lane_tail.len(), nodes: out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::Origin;

    fn node(deps: &[usize]) -> Node {
        Node {
            handle: 0,
            lane: 0,
            deps: deps.to_vec(),
            programmatic: Vec::new(),
            kind: NodeKind::Empty,
            origin: Origin { api: "cuGraphAddEmptyNode", thread: Default::default(), site: Default::default() },
            kernel: None,
            grid_wait: GridWait::Unseen,
        }
    }

    #[test]
    fn nodes_are_ordered_after_their_dependencies_and_lanes_are_chains() {
        let mut def = Definition::default();
        // 0 <- 2 -> 1 written out of order: 1 depends on 2, which is added after it.
        def.add(node(&[]), None);
        def.add(node(&[2]), None);
        def.add(node(&[0]), None);
        let graph = def.executable().unwrap();
        for (i, n) in graph.nodes.iter().enumerate() {
            assert!(n.deps.iter().all(|&d| d < i), "{i}: {:?}", n.deps);
        }
        // A chain of three: one lane.
        assert_eq!(graph.lanes, 1);
    }

    #[test]
    fn a_child_graph_runs_between_the_node_s_dependencies_and_dependents() {
        let mut child = Definition::default();
        child.add(node(&[]), None);
        child.add(node(&[]), None);
        let mut def = Definition::default();
        def.add(node(&[]), None);
        def.add(node(&[0]), Some(Arc::new(child)));
        def.add(node(&[1]), None);
        let graph = def.executable().unwrap();
        // entry, two child nodes, exit, and the two plain nodes.
        assert_eq!(graph.nodes.len(), 6);
        let last = graph.nodes.last().unwrap();
        assert_eq!(last.deps.len(), 1);
        let exit = &graph.nodes[last.deps[0]];
        assert_eq!(exit.deps.len(), 3);
        // Two concurrent child nodes: two lanes.
        assert_eq!(graph.lanes, 2);
    }

    #[test]
    fn an_opaque_definition_makes_no_executable_graph() {
        let def = Definition { opaque: true, ..Definition::default() };
        assert!(def.executable().is_none());
    }
}
