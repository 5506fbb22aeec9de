//! Stream capture and graph launch (`docs/semantics.md#capture-and-graphs`): a launch replays
//! the captured nodes as operations, each checked by the rule of the operation it was
//! captured from.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::model::buffers::MemoryKind;
use crate::model::capture::{Capture, CaptureLane, Exec, ExecState, Member};
use crate::model::clock::{Epoch, Slot, VectorClock};
use crate::model::definition::{flagged, Definition, Graph, Node, NodeKind};
use crate::model::events::EventState;
use crate::model::op::{OpRecord, Origin, Overlap};
use crate::model::race::{NoteKind, Race};
use crate::model::streams::{SlotOwner, Stream, StreamRef};
use crate::model::{Alloc, Model};

impl Model {
    /// `cuStreamBeginCapture(S)`: what S issues from now on is recorded, not executed.
    pub fn capture_begin(&self, stream: StreamRef) {
        self.begin(stream, Capture::new(), Vec::new(), Vec::new());
    }

    /// `cuStreamBeginCaptureToGraph(S, G, deps)`: as a capture, whose nodes are added to G's
    /// definition, the first ones after the nodes `deps`, through programmatic edges where
    /// `programmatic` says (none where it is empty). A graph the model does not know, or a
    /// dependency it cannot place, makes G a graph it does not follow.
    pub fn capture_begin_into(&self, stream: StreamRef, graph: u64, deps: &[u64], programmatic: &[bool]) {
        let definition = self.graphs.graphs.get(&graph).map(|d| lock_definition(&d).clone());
        let mut definition = definition.unwrap_or(Definition { opaque: true, ..Definition::default() });
        let frontier = deps.iter().map(|&h| definition.index_of(h)).collect::<Option<Vec<usize>>>();
        let frontier = frontier.unwrap_or_else(|| {
            definition.opaque = true;
            Vec::new()
        });
        let programmatic = flagged(&frontier, programmatic);
        self.begin(stream, Capture::into(Some(graph), definition), frontier, programmatic);
    }

    fn begin(&self, stream: StreamRef, capture: Arc<Capture>, frontier: Vec<usize>, programmatic: Vec<usize>) {
        let stream = self.stream(stream);
        let lane = capture.join(stream.clone());
        stream.lock().capture = Some(CaptureLane { capture, lane, frontier, programmatic });
        stream.capturing.store(true, Ordering::Release);
    }

    /// `cuStreamUpdateCaptureDependencies(S, deps, flags)`: S's next node depends on `deps`
    /// (`set`) or on them too, through programmatic edges where `programmatic` says (none
    /// where it is empty). Nodes the model cannot place (the driver's handles of captured
    /// nodes) are taken as every node captured so far, through ordinary edges: that can hide
    /// a race, never invent one.
    pub fn capture_dependencies(&self, stream: StreamRef, deps: &[u64], programmatic: &[bool], set: bool) {
        let stream = self.stream(stream);
        let mut state = stream.lock();
        let Some(lane) = state.capture.as_mut() else { return };
        let (nodes, programmatic) = match lane.capture.indices_of(deps) {
            Some(nodes) => {
                let programmatic = flagged(&nodes, programmatic);
                (nodes, programmatic)
            }
            None => (lane.capture.all_nodes(), Vec::new()),
        };
        if set {
            lane.frontier.clear();
            lane.programmatic.clear();
        }
        for n in nodes {
            if !lane.frontier.contains(&n) {
                lane.frontier.push(n);
            }
        }
        lane.programmatic.extend(programmatic);
    }

    /// A stream waits on an event recorded in a capture: it joins that capture, or, already
    /// in it, adds the event's nodes to its frontier.
    pub(super) fn join_capture(&self, stream: &Arc<Stream>, capture: Arc<Capture>, nodes: Vec<usize>) {
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
                let lane = capture.join(stream.clone());
                state.capture = Some(CaptureLane { capture, lane, frontier: nodes, programmatic: Vec::new() });
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
            member.leave(&lane.capture);
        }
        let captured = lane.capture.finish();
        if let Some(graph) = lane.capture.target.or(graph) {
            self.graphs.graphs.insert(graph, Arc::new(Mutex::new(captured)));
        }
    }

    /// `cuGraphInstantiate*`: an executable graph of a graph streamsan followed, if it did.
    pub fn graph_instantiated(&self, exec: u64, graph: u64) {
        match self.executable(graph) {
            Some(g) => {
                let exec_graph = Exec { graph: Arc::new(g), state: Mutex::new(ExecState::default()) };
                self.graphs.execs.insert(exec, Arc::new(exec_graph));
            }
            None => {
                self.graphs.execs.remove(&exec);
            }
        }
    }

    /// A snapshot of `graph`'s definition to run, if the model follows it.
    pub(super) fn executable(&self, graph: u64) -> Option<Graph> {
        let definition = self.graphs.graphs.get(&graph).map(|d| d.clone())?;
        let graph = lock_definition(&definition).executable();
        graph
    }

    pub fn graph_destroyed(&self, graph: u64) {
        self.graphs.graphs.remove(&graph);
        self.graphs.node_graphs.retain(|_, g| *g != graph);
    }

    pub fn exec_destroyed(&self, exec: u64) {
        // The lanes' slots go back, each with the time of its lane's last node (capture.rs
        // knows nothing of slots' owners: it sits below streams).
        if let Some((_, exec)) = self.graphs.execs.remove(&exec) {
            let state = exec.state.lock().unwrap_or_else(|e| e.into_inner());
            for &slot in &state.lane_slots {
                self.streams.slots.retire_lane(slot, state.end.get(slot));
            }
        }
    }

    /// `cuGraphLaunch(G, S)`: every node is ordered after the work issued on S before the
    /// launch and after its predecessors (and launches of one executable graph after each
    /// other); work issued on S afterwards is ordered after every node. A graph streamsan
    /// did not follow runs unchecked, with a note.
    pub fn graph_launch(&self, exec: u64, stream: StreamRef, origin: &Origin) {
        self.graph_launch_measured(exec, stream, origin, &[]);
    }

    /// [`Model::graph_launch`] whose kernel nodes `measured` (node handle, ticket) run on
    /// twins, each issued as a measured launch is ([`Model::launch_pending`]). Returns the
    /// tickets that wait for no footprint (the graph is not followed, or the launch became a
    /// node of a capture): their tables go back unread.
    pub fn graph_launch_measured(
        &self,
        exec: u64,
        stream: StreamRef,
        origin: &Origin,
        measured: &[(u64, u64)],
    ) -> Vec<u64> {
        let unread = || measured.iter().map(|&(_, ticket)| ticket).collect();
        let stream = self.stream(stream);
        let exec_graph = self.graphs.execs.get(&exec).map(|e| e.clone());
        if self.capture_node(&stream, || NodeKind::Empty, origin, None) {
            return unread();
        }
        let (state, epoch) = self.issue(&stream);
        let Some(exec_graph) = exec_graph else {
            drop(state);
            self.notes.add(NoteKind::GraphNotFollowed, OpRecord::new(origin, None, epoch), exec);
            return unread();
        };
        let mut base = state.clock.clone();
        drop(state);
        let graph = &exec_graph.graph;
        let mut exec_state = exec_graph.state.lock().unwrap_or_else(|e| e.into_inner());
        if exec_state.lane_slots.is_empty() {
            exec_state.lane_slots = self.lane_slots(graph, exec, epoch, &base);
        }
        exec_state.launches += 1;
        // One executable graph's launches are ordered after each other, whatever their
        // streams (`docs/semantics.md#deviations`).
        base.join(&exec_state.end);
        let mut found = Vec::new();
        let run = Run { exec: &exec_graph, measured };
        let end = self.run_nodes(&run, &exec_state, &base, &mut found);
        exec_state.end.assign(&end);
        drop(exec_state);
        let mut state = stream.lock();
        state.clock.join(&end);
        stream.changed();
        drop(state);
        self.publish(found);
        Vec::new()
    }

    /// One slot per lane of `graph`, allocated at the executable graph's first launch (the
    /// operation `launch`, whose clock is `base`) and kept for its later ones: a lane's nodes
    /// form a chain, so one slot orders them. A lane may take the slot of a destroyed graph's
    /// lane that this launch is ordered after (a graph captured and launched again on one
    /// stream, destroyed in between).
    fn lane_slots(&self, graph: &Graph, exec: u64, launch: Epoch, base: &VectorClock) -> Vec<Slot> {
        (0..graph.lanes)
            .map(|_| self.streams.slots.allocate_lane(SlotOwner::GraphLane { exec, launch }, base))
            .collect()
    }

    /// Runs the nodes of one launch in order (their order is topological), each checked
    /// like the operation it was captured from; returns the clock at the end of the launch,
    /// the join of every node's.
    fn run_nodes(&self, run: &Run<'_>, state: &ExecState, base: &VectorClock, found: &mut Vec<Race>) -> VectorClock {
        let graph = &run.exec.graph;
        let mut clocks: Vec<VectorClock> = Vec::with_capacity(graph.nodes.len());
        let mut end = base.clone();
        for (i, node) in graph.nodes.iter().enumerate() {
            let mut clock = self.node_clock(node, base, &clocks);
            let epoch = clock.tick(state.lane_slots[node.lane]);
            let op = OpRecord::new(&node.origin, node.kernel, epoch);
            let overlap = self.overlapping_node(graph, &state.lane_slots, i, (base, &clock), &clocks);
            let ticket = run.measured.iter().find(|&&(h, _)| h == node.handle && h != 0).map(|&(_, t)| t);
            match (ticket, &node.kind, state.measured.get(i).cloned().flatten()) {
                (Some(ticket), NodeKind::Work { accesses }, _) => {
                    self.pend_node(ticket, op, (&clock, overlap), accesses, (run.exec, i, state.launches))
                }
                (None, NodeKind::Work { .. }, Some((_, measured))) => {
                    self.accesses_now(&measured, op, &clock, &overlap, found)
                }
                _ => self.run_node(node, op, &clock, &overlap, found),
            }
            end.join(&clock);
            clocks.push(clock);
        }
        end
    }

    /// For the kernel node `i` of `graph`, run as `op` with `clock` (`base` the launch's),
    /// how it is ordered after the kernel nodes its programmatic edges come from
    /// (programmatic dependent launch, `docs/semantics.md#programmatic-dependent-launch`):
    /// where such a kernel is not ordered before it another way, the node may run beside it,
    /// until the end if its kernel never waits on its grid dependencies, until its first wait
    /// if it waits. Its overlapping accesses take from each such kernel only what that kernel
    /// was ordered after.
    fn overlapping_node(
        &self,
        graph: &Graph,
        lane_slots: &[Slot],
        i: usize,
        (base, clock): (&VectorClock, &VectorClock),
        clocks: &[VectorClock],
    ) -> Overlap {
        let node = &graph.nodes[i];
        if node.programmatic.is_empty() || !is_kernel(node) {
            return Overlap::None;
        }
        Overlap::of(node.grid_wait, self.beside_primaries(graph, lane_slots, i, base, clocks), clock)
    }

    /// The clock of node `i` of `graph` but for the kernel nodes its programmatic edges come
    /// from, which it may run beside: from each such kernel only what it was ordered after.
    /// None where no such kernel is left unordered (it is ordered another way).
    fn beside_primaries(
        &self,
        graph: &Graph,
        lane_slots: &[Slot],
        i: usize,
        base: &VectorClock,
        clocks: &[VectorClock],
    ) -> Option<VectorClock> {
        let node = &graph.nodes[i];
        let primaries: Vec<usize> = node.programmatic.iter().copied().filter(|&d| is_kernel(&graph.nodes[d])).collect();
        if primaries.is_empty() {
            return None;
        }
        let mut clock = base.clone();
        let mut left_out = Vec::with_capacity(primaries.len());
        for &dep in &node.deps {
            if !primaries.contains(&dep) {
                clock.join(&clocks[dep]);
                continue;
            }
            // The primary's clock before its own tick: what it was ordered after.
            let slot = lane_slots[graph.nodes[dep].lane];
            let time = clocks[dep].get(slot);
            let mut start = clocks[dep].clone();
            start.set(slot, time - 1);
            clock.join(&start);
            left_out.push((slot, time));
        }
        left_out.iter().any(|&(slot, time)| clock.get(slot) < time).then_some(clock)
    }

    /// The clock a node starts from: the launch's, joined with its predecessors' and, for a
    /// wait on an event recorded outside the capture, with the event's as it is now.
    fn node_clock(&self, node: &Node, base: &VectorClock, clocks: &[VectorClock]) -> VectorClock {
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
        clock
    }

    /// What a node does when it runs as `op`, with clock `clock` (`overlap`: a kernel node's
    /// order after the kernel nodes its programmatic edges come from): the rule of the
    /// operation it was captured from.
    fn run_node(&self, node: &Node, op: OpRecord, clock: &VectorClock, overlap: &Overlap, found: &mut Vec<Race>) {
        match &node.kind {
            NodeKind::Work { accesses } => self.accesses_now(accesses, op, clock, overlap, found),
            NodeKind::Alloc { base, size, ctx } => {
                let alloc = Alloc { base: *base, size: *size, kind: MemoryKind::GraphOwned, ctx: *ctx };
                self.register(alloc, 0, op);
            }
            NodeKind::Free { base } => self.release(*base, op, clock, found),
            NodeKind::RecordEvent { event } => {
                self.events.with(*event, |e| *e.lock() = EventState::Recorded(clock.clone()))
            }
            NodeKind::HostFunc(callback) => callback.set(clock),
            NodeKind::WaitEvent { .. } | NodeKind::Empty => {}
        }
    }
}

/// Whether a node launches a kernel.
fn is_kernel(node: &Node) -> bool {
    node.kernel.is_some() && matches!(node.kind, NodeKind::Work { .. })
}

/// One launch of an executable graph: the graph, and the kernel nodes measured at it, each
/// as (node handle, ticket).
pub(super) struct Run<'a> {
    pub(super) exec: &'a Arc<Exec>,
    pub(super) measured: &'a [(u64, u64)],
}

/// A definition, locked.
pub(super) fn lock_definition(definition: &Mutex<Definition>) -> std::sync::MutexGuard<'_, Definition> {
    definition.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stream leaves a capture when the capture ends, whichever of its streams ends it.
impl Member for Stream {
    fn leave(&self, capture: &Arc<Capture>) {
        let mut state = self.lock();
        if state.capture.as_ref().is_some_and(|l| Arc::ptr_eq(&l.capture, capture)) {
            state.capture = None;
            self.capturing.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::buffers::MemoryKind;
    use crate::model::definition::{AddedNode, NodeKind};
    use crate::model::op::{Access, GridWait, HostEffect, Mode, Origin, WaitPlace};
    use crate::model::race::{NoteKind, RaceKind};
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, Model, Work};

    const STREAM: StreamRef = StreamRef::Handle(0x10);

    fn write(model: &Model, addr: u64, len: u64) {
        let access = [Access::new(addr, len, Mode::Write)];
        let origin = Origin::test("cuMemsetD8Async", 2);
        model.work(STREAM, Work { origin, kernel: None, accesses: &access, host: HostEffect::None });
    }

    /// Dependencies the model cannot place (the driver's handles of captured nodes) are taken
    /// as every node captured so far: not as none, nor as one of them.
    #[test]
    fn captured_work_after_dependencies_the_model_cannot_place_follows_every_node_before() {
        let model = Model::default();
        let alloc = Alloc { base: 0x1000, size: 64, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(alloc, None, &Origin::test("cuMemAlloc_v2", 1));
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        model.capture_begin(STREAM);
        // Two nodes depending on nothing, then one after "every node", writing both's bytes.
        write(&model, 0x1000, 8);
        model.capture_dependencies(STREAM, &[], &[], true);
        write(&model, 0x1008, 8);
        model.capture_dependencies(STREAM, &[0xdead], &[], true);
        write(&model, 0x1000, 16);
        model.capture_end(STREAM, Some(0x6000));
        model.graph_instantiated(0x7000, 0x6000);
        model.graph_launch(0x7000, STREAM, &Origin::test("cuGraphLaunch", 3));
        assert!(model.races().is_empty(), "{:?}", model.races());
    }

    /// A kernel writes a buffer, then a kernel launched programmatically reads it, captured
    /// on one stream; `wait` is the reader's, and `place` its read's around its wait.
    /// Returns the races and the notes of one launch.
    fn captured_programmatic(wait: GridWait, place: WaitPlace) -> (Vec<RaceKind>, Vec<NoteKind>) {
        let model = Model::default();
        let alloc = Alloc { base: 0x1000, size: 64, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(alloc, None, &Origin::test("cuMemAlloc_v2", 1));
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        model.capture_begin(STREAM);
        let kernel = |name, mode, site| {
            let access = [Access { place, ..Access::new(0x1000, 64, mode) }];
            let origin = Origin::test("cuLaunchKernelEx", site);
            let kernel = Some(model.kernel_id(name, name));
            model.work(STREAM, Work { origin, kernel, accesses: &access, host: HostEffect::None });
        };
        kernel("primary", Mode::Write, 2);
        model.programmatic_next_launch(STREAM, wait);
        kernel("dependent", Mode::Read, 3);
        // After the dependent, the stream orders what follows after both.
        kernel("after", Mode::Write, 4);
        model.capture_end(STREAM, Some(0x6000));
        model.graph_instantiated(0x7000, 0x6000);
        model.graph_launch(0x7000, STREAM, &Origin::test("cuGraphLaunch", 5));
        (model.races().iter().map(|r| r.race.kind).collect(), model.notes().iter().map(|n| n.kind).collect())
    }

    /// Captured, a programmatic launch whose kernel never waits overlaps the kernel node
    /// before it; one whose kernel waits overlaps it with what it touches before its wait;
    /// one whose accesses' places around the wait are not known is ordered, and noted at each
    /// launch.
    #[test]
    fn a_captured_programmatic_launch_overlaps_the_kernel_node_before_it_until_its_wait() {
        let noted = vec![NoteKind::ProgrammaticLaunch];
        assert_eq!(captured_programmatic(GridWait::Never, WaitPlace::Unknown), (vec![RaceKind::CrossStream], vec![]));
        assert_eq!(captured_programmatic(GridWait::Unseen, WaitPlace::Unknown), (vec![], noted));
        assert_eq!(captured_programmatic(GridWait::Unseen, WaitPlace::Before), (vec![RaceKind::CrossStream], vec![]));
        assert_eq!(captured_programmatic(GridWait::Unseen, WaitPlace::After), (vec![], vec![]));
    }

    /// Captured into a graph after its kernel node reached through a programmatic edge (edge
    /// data of `cuStreamBeginCaptureToGraph`), a launch whose kernel's wait the shim did not
    /// give (not launched programmatically) is ordered, and noted at each launch.
    #[test]
    fn a_launch_captured_after_a_programmatic_edge_is_noted() {
        let model = Model::default();
        let alloc = Alloc { base: 0x1000, size: 64, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(alloc, None, &Origin::test("cuMemAlloc_v2", 1));
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        model.graph_created(0x6000);
        let kind = NodeKind::Work { accesses: vec![Access::new(0x1000, 64, Mode::Write)] };
        let kernel = Some(model.kernel_id("primary", "primary"));
        let origin = Origin::test("cuGraphAddKernelNode", 2);
        let grid_wait = GridWait::Unseen;
        let node =
            AddedNode { graph: 0x6000, handle: 0x50, deps: &[], programmatic: &[], kind, origin, kernel, grid_wait };
        model.graph_node_added(node, None);
        model.capture_begin_into(STREAM, 0x6000, &[0x50], &[true]);
        let access = [Access::new(0x1000, 64, Mode::Read)];
        let kernel = Some(model.kernel_id("dependent", "dependent"));
        let origin = Origin::test("cuLaunchKernel", 3);
        model.work(STREAM, Work { origin, kernel, accesses: &access, host: HostEffect::None });
        model.capture_end(STREAM, None);
        model.graph_instantiated(0x7000, 0x6000);
        model.graph_launch(0x7000, STREAM, &Origin::test("cuGraphLaunch", 4));
        assert!(model.races().is_empty(), "{:?}", model.races());
        let notes: Vec<_> = model.notes().iter().map(|n| n.kind).collect();
        assert_eq!(notes, vec![NoteKind::ProgrammaticLaunch]);
    }

    /// A host function captured into a graph runs at each launch, not once: the shim keeps it
    /// apart from one issued.
    #[test]
    fn a_host_function_captured_is_marked_so_and_one_issued_is_not() {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        let origin = Origin::test("cuLaunchHostFunc", 2);
        assert!(!model.host_func(STREAM, &origin).captured());
        model.capture_begin(STREAM);
        assert!(model.host_func(STREAM, &origin).captured());
    }
}
