//! Graphs built with the explicit graph API (`docs/semantics.md#capture-and-graphs`): nodes
//! added, edited and removed in the definitions that captures fill too. A node the model
//! cannot follow makes the graph's launches noted, never checked against a partial picture.

use std::sync::{Arc, Mutex};

use crate::model::capture::{Exec, ExecState};
use crate::model::definition::{flagged, AddedNode, Definition, Graph, Node, NodeKind};
use crate::model::op::{GridWait, KernelId};
use crate::model::Model;

use super::graphs::lock_definition;

impl Model {
    /// `cuGraphCreate`: an empty graph.
    pub fn graph_created(&self, graph: u64) {
        self.graphs.graphs.insert(graph, Arc::new(Mutex::new(Definition::default())));
    }

    /// `cuGraphClone`: a copy, whose nodes have handles the model does not know yet.
    pub fn graph_cloned(&self, clone: u64, original: u64) {
        let mut copy = self.definition(original).map(|d| lock_definition(&d).clone()).unwrap_or_else(opaque);
        for defined in &mut copy.nodes {
            defined.node.handle = 0;
        }
        self.graphs.graphs.insert(clone, Arc::new(Mutex::new(copy)));
    }

    fn definition(&self, graph: u64) -> Option<Arc<Mutex<Definition>>> {
        self.graphs.graphs.get(&graph).map(|d| d.clone())
    }

    /// A `cuGraphAdd*Node`. `child`: the graph a child graph node copies.
    pub fn graph_node_added(&self, added: AddedNode<'_>, child: Option<u64>) {
        let Some(definition) = self.definition(added.graph) else {
            return;
        };
        let child =
            child.map(|c| Arc::new(self.definition(c).map(|d| lock_definition(&d).clone()).unwrap_or_else(opaque)));
        let mut definition = lock_definition(&definition);
        let Some(deps) = added.deps.iter().map(|&h| definition.index_of(h)).collect::<Option<Vec<usize>>>() else {
            definition.opaque = true;
            return;
        };
        if let NodeKind::Alloc { base, size, .. } = added.kind {
            // Its address is the graph's from now on: kernel nodes added later name it as a
            // buffer, which their launches find registered by this node.
            self.buffers.widen(base, base + size);
        }
        let programmatic = flagged(&deps, added.programmatic);
        let node = Node {
            handle: added.handle,
            lane: 0,
            deps,
            programmatic,
            kind: added.kind,
            origin: added.origin,
            kernel: added.kernel,
            grid_wait: added.grid_wait,
        };
        definition.add(node, child);
        drop(definition);
        self.graphs.node_graphs.insert(added.handle, added.graph);
    }

    /// A node added through a call the model cannot follow: the graph is not followed.
    pub fn graph_opaque_node_added(&self, graph: u64) {
        if let Some(definition) = self.definition(graph) {
            lock_definition(&definition).opaque = true;
        }
    }

    /// `cuGraphAddDependencies` (`add`) or `cuGraphRemoveDependencies`: `to[i]` depends on
    /// `from[i]`, or no longer does; added, through a programmatic edge where
    /// `programmatic[i]` (none where it is empty).
    pub fn graph_edges(&self, graph: u64, from: &[u64], to: &[u64], programmatic: &[bool], add: bool) {
        let Some(definition) = self.definition(graph) else {
            return;
        };
        let mut definition = lock_definition(&definition);
        for (i, (&f, &t)) in from.iter().zip(to).enumerate() {
            let (Some(f), Some(t)) = (definition.index_of(f), definition.index_of(t)) else {
                definition.opaque = true;
                return;
            };
            let node = &mut definition.nodes[t].node;
            if add && !node.deps.contains(&f) {
                node.deps.push(f);
                if programmatic.get(i) == Some(&true) {
                    node.programmatic.push(f);
                }
            } else if !add {
                node.deps.retain(|&d| d != f);
                node.programmatic.retain(|&d| d != f);
            }
        }
    }

    /// `cuGraph*NodeSetParams`: the node does something else now.
    pub fn graph_node_params(&self, handle: u64, kind: NodeKind, kernel: Option<KernelId>, grid_wait: GridWait) {
        let Some(graph) = self.graphs.node_graphs.get(&handle).map(|g| *g) else {
            return;
        };
        let Some(definition) = self.definition(graph) else {
            return;
        };
        let mut definition = lock_definition(&definition);
        match definition.index_of(handle) {
            Some(i) => {
                let node = &mut definition.nodes[i].node;
                (node.kind, node.kernel, node.grid_wait) = (kind, kernel, grid_wait);
            }
            None => definition.opaque = true,
        }
    }

    /// `cuGraphDestroyNode`: the node and its edges are gone.
    pub fn graph_node_destroyed(&self, handle: u64) {
        let Some((_, graph)) = self.graphs.node_graphs.remove(&handle) else {
            return;
        };
        let Some(definition) = self.definition(graph) else {
            return;
        };
        let mut definition = lock_definition(&definition);
        if let Some(i) = definition.index_of(handle) {
            definition.nodes[i].removed = true;
        }
    }

    /// `cuGraphExecUpdate` succeeded: the executable graph runs `graph` as it is now, and its
    /// later launches still follow its earlier ones.
    pub fn exec_updated(&self, exec: u64, graph: u64) {
        let end = self.graphs.execs.get(&exec).map(|e| e.state.lock().unwrap_or_else(|e| e.into_inner()).end.clone());
        match self.executable(graph) {
            Some(g) => self.replace_exec(exec, g, end.unwrap_or_default()),
            None => {
                self.graphs.execs.remove(&exec);
            }
        }
    }

    /// `cuGraphExec*NodeSetParams`: one node of the executable graph does something else now.
    pub fn exec_node_params(
        &self,
        exec: u64,
        handle: u64,
        kind: NodeKind,
        kernel: Option<KernelId>,
        grid_wait: GridWait,
    ) {
        let Some(current) = self.graphs.execs.get(&exec).map(|e| e.clone()) else {
            return;
        };
        let mut nodes = current.graph.nodes.clone();
        match nodes.iter_mut().find(|n| n.handle == handle && handle != 0) {
            Some(node) => (node.kind, node.kernel, node.grid_wait) = (kind, kernel, grid_wait),
            None => {
                self.graphs.execs.remove(&exec);
                return;
            }
        }
        let end = current.state.lock().unwrap_or_else(|e| e.into_inner()).end.clone();
        self.replace_exec(exec, Graph { nodes, lanes: current.graph.lanes }, end);
    }

    fn replace_exec(&self, exec: u64, graph: Graph, end: crate::model::clock::VectorClock) {
        let state = ExecState { lane_slots: Vec::new(), end, ..ExecState::default() };
        self.graphs.execs.insert(exec, Arc::new(Exec { graph: Arc::new(graph), state: Mutex::new(state) }));
    }
}

fn opaque() -> Definition {
    Definition { opaque: true, ..Definition::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::buffers::MemoryKind;
    use crate::model::op::{Access, Mode, Origin};
    use crate::model::race::{NoteKind, RaceKind};
    use crate::model::streams::StreamRef;
    use crate::model::Alloc;

    const GRAPH: u64 = 0x6000;
    const EXEC: u64 = 0x7000;
    const BUFFER: u64 = 0x10_0000;

    fn origin(site: u32) -> Origin {
        Origin::test("cuGraphAddKernelNode", site)
    }

    /// A model with one device buffer and an empty graph.
    fn model() -> Model {
        let model = Model::default();
        let alloc = Alloc { base: BUFFER, size: 256, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(alloc, None, &origin(0));
        model.graph_created(GRAPH);
        model
    }

    /// Adds a node writing the whole buffer, after `deps`.
    fn writer(model: &Model, handle: u64, deps: &[u64]) {
        add(model, handle, deps, Mode::Write, None, GridWait::Unseen);
    }

    /// Adds a node accessing the whole buffer, after `deps`: a kernel's if `kernel`.
    fn add(model: &Model, handle: u64, deps: &[u64], mode: Mode, kernel: Option<&str>, grid_wait: GridWait) {
        let kind = NodeKind::Work { accesses: vec![Access::new(BUFFER, 256, mode)] };
        let kernel = kernel.map(|k| model.kernel_id(k, k));
        let origin = origin(handle as u32);
        let node = AddedNode { graph: GRAPH, handle, deps, programmatic: &[], kind, origin, kernel, grid_wait };
        model.graph_node_added(node, None);
    }

    fn launch(model: &Model) -> (Vec<RaceKind>, usize) {
        model.graph_instantiated(EXEC, GRAPH);
        model.graph_launch(EXEC, StreamRef::Legacy { ctx: 1 }, &origin(99));
        let races = model.races().iter().map(|r| r.race.kind).collect();
        let not_followed = model.notes().iter().filter(|n| n.kind == NoteKind::GraphNotFollowed).count();
        (races, not_followed)
    }

    #[test]
    fn an_edge_added_orders_two_writers_and_removed_no_longer_does() {
        let ordered = model();
        writer(&ordered, 1, &[]);
        writer(&ordered, 2, &[]);
        ordered.graph_edges(GRAPH, &[1], &[2], &[], true);
        assert_eq!(launch(&ordered), (vec![], 0));

        let unordered = model();
        writer(&unordered, 1, &[]);
        writer(&unordered, 2, &[1]);
        unordered.graph_edges(GRAPH, &[1], &[2], &[], false);
        assert_eq!(launch(&unordered), (vec![RaceKind::CrossStream], 0));
    }

    /// A kernel node reached from another through a programmatic edge overlaps it when its
    /// kernel never waits on its grid dependencies; when its wait is not seen it is ordered,
    /// and noted. A memset before both stays ordered before the dependent.
    #[test]
    fn a_programmatic_edge_lets_a_kernel_that_never_waits_overlap_its_primary() {
        for (wait, expected) in [(GridWait::Never, (vec![RaceKind::CrossStream], 0)), (GridWait::Unseen, (vec![], 0))] {
            let model = model();
            writer(&model, 1, &[]);
            add(&model, 2, &[1], Mode::Write, Some("primary"), GridWait::Unseen);
            add(&model, 3, &[], Mode::Read, Some("dependent"), wait);
            model.graph_edges(GRAPH, &[2], &[3], &[true], true);
            assert_eq!(launch(&model), expected, "{wait:?}");
            let noted = model.notes().iter().filter(|n| n.kind == NoteKind::ProgrammaticLaunch).count();
            assert_eq!(noted, usize::from(wait == GridWait::Unseen), "{wait:?}");
            let race = model.races();
            if let Some(race) = race.first() {
                assert_eq!(race.race.first.op.site.0, 2, "with the primary, not the memset before it");
            }
        }
    }

    #[test]
    fn a_node_the_model_cannot_follow_makes_the_graph_not_followed() {
        let model = model();
        writer(&model, 1, &[]);
        writer(&model, 2, &[]);
        model.graph_opaque_node_added(GRAPH);
        assert_eq!(launch(&model), (vec![], 1), "unchecked, and noted");
    }

    #[test]
    fn a_child_graph_the_model_does_not_know_makes_the_graph_not_followed() {
        let model = model();
        writer(&model, 1, &[]);
        writer(&model, 2, &[]);
        let child = AddedNode {
            graph: GRAPH,
            handle: 3,
            deps: &[],
            programmatic: &[],
            kind: NodeKind::Empty,
            origin: origin(3),
            kernel: None,
            grid_wait: GridWait::Unseen,
        };
        model.graph_node_added(child, Some(0x9999));
        assert_eq!(launch(&model), (vec![], 1), "unchecked, and noted");
    }
}
