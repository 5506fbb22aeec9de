//! Measured kernel nodes of executable graphs (`footprint=exact|learn`): which kernel nodes a
//! graph launch measures, each issued as a measured launch is and checked when its
//! footprint arrives ([`crate::model::rules::footprint_late`]), and what each node's last
//! measurement showed, which stands for its parameters at the launches that measure it not.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::model::capture::Exec;
use crate::model::clock::VectorClock;
use crate::model::definition::NodeKind;
use crate::model::footprint::learnt::sampled;
use crate::model::op::{Access, KernelId, OpRecord, Overlap};
use crate::model::Model;

use super::graphs::lock_definition;

impl Model {
    /// The driver's kernel nodes of `graph` (handle and kernel), in the order the driver
    /// lists them: the model's kernel nodes are named so, if the two lists agree
    /// ([`crate::model::definition::Definition::name_kernels`]). Whether they did.
    pub fn graph_kernels_named(&self, graph: u64, kernels: &[(u64, Option<KernelId>)]) -> bool {
        let Some(definition) = self.graphs.graphs.get(&graph).map(|d| d.clone()) else {
            return false;
        };
        if !lock_definition(&definition).name_kernels(kernels) {
            return false;
        }
        for &(handle, _) in kernels {
            self.graphs.node_graphs.insert(handle, graph);
        }
        true
    }

    /// The handles of the kernel nodes of `exec` that its next launch is to measure, the
    /// least recently measured first: every one (`every`, `footprint=exact`); else those
    /// never measured, and every one at the launches a learnt key is checked at (the 4th,
    /// 8th, 16th, 32nd, 64th, 256th..., [`sampled`]), which check what was measured before
    /// (a kernel whose footprint follows device data).
    pub fn graph_nodes_to_measure(&self, exec: u64, every: bool) -> Vec<u64> {
        let Some(exec) = self.graphs.execs.get(&exec).map(|e| e.clone()) else {
            return Vec::new();
        };
        let state = exec.state.lock().unwrap_or_else(|e| e.into_inner());
        let next = state.launches + 1;
        let check = every || sampled(u32::try_from(next).unwrap_or(u32::MAX), 0);
        let last = |i: usize| state.measured.get(i).cloned().flatten().map(|(launch, _)| launch);
        let mut nodes: Vec<(Option<u64>, u64)> = exec
            .graph
            .nodes
            .iter()
            .enumerate()
            .filter(|&(i, n)| {
                n.handle != 0
                    && n.kernel.is_some()
                    && matches!(n.kind, NodeKind::Work { .. })
                    && (check || last(i).is_none())
            })
            .map(|(i, n)| (last(i), n.handle))
            .collect();
        nodes.sort_by_key(|&(last, _)| last);
        nodes.into_iter().map(|(_, handle)| handle).collect()
    }

    /// Issues a node, run as `op` with `clock` (`overlap`: how it is ordered after the kernel
    /// nodes its programmatic edges come from), as a measured launch pending as `ticket`;
    /// `guess`: what its parameters say; `at`: its executable graph, its index there and the
    /// graph's launch (counted).
    pub(super) fn pend_node(
        &self,
        ticket: u64,
        op: OpRecord,
        (clock, overlap): (&VectorClock, Overlap),
        guess: &[Access],
        at: (&Arc<Exec>, usize, u64),
    ) {
        let (exec, node, launch) = at;
        let next_buffer = self.next_buffer.load(Ordering::Relaxed);
        self.graphs.measuring.insert(ticket, (Arc::downgrade(exec), node, launch));
        let met = self.met_buffers(guess);
        self.pending.pend(ticket, op, (clock.clone(), overlap), next_buffer, met, guess.to_vec(), None);
    }

    /// The footprint of the measured launch `ticket` arrived (`accesses`, None: it could not
    /// be read): if it was a graph's node, the node keeps it for its later launches.
    pub(super) fn node_measured(&self, ticket: u64, accesses: Option<&[Access]>) {
        let Some((_, (exec, node, launch))) = self.graphs.measuring.remove(&ticket) else { return };
        let (Some(exec), Some(accesses)) = (exec.upgrade(), accesses) else { return };
        let mut state = exec.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.measured.len() <= node {
            state.measured.resize(node + 1, None);
        }
        state.measured[node] = Some((launch, accesses.into()));
    }
}

#[cfg(test)]
mod tests {
    use crate::model::buffers::MemoryKind;
    use crate::model::definition::{AddedNode, NodeKind};
    use crate::model::footprint::measured::Footprint;
    use crate::model::op::{Access, GridWait, HostEffect, KernelId, Mode, Origin};
    use crate::model::race::RaceKind;
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, Model, Work};

    const GRAPH: u64 = 0x6000;
    const EXEC: u64 = 0x7000;
    const BUFFER: u64 = 0x10_0000;
    const STREAM: StreamRef = StreamRef::Handle(0x10);

    /// A model with a stream, a device buffer and an empty graph.
    fn model() -> Model {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &Origin::test("cuStreamCreate", 1));
        let alloc = Alloc { base: BUFFER, size: 256, kind: MemoryKind::Device, ctx: 1 };
        model.alloc(alloc, None, &Origin::test("cuMemAlloc", 2));
        model.graph_created(GRAPH);
        model
    }

    /// Adds kernel node `handle` (kernel `handle`) after `deps`; its parameters name nothing.
    fn kernel_node(model: &Model, handle: u64, deps: &[u64]) {
        let origin = Origin::test("cuGraphAddKernelNode", handle as u32 + 10);
        let kind = NodeKind::Work { accesses: Vec::new() };
        let kernel = Some(KernelId(handle as u32));
        let grid_wait = GridWait::Unseen;
        let node = AddedNode { graph: GRAPH, handle, deps, programmatic: &[], kind, origin, kernel, grid_wait };
        model.graph_node_added(node, None);
    }

    /// Launches the graph with both kernel nodes measured, each found writing the buffer's
    /// first 8 bytes: the races found.
    fn launch_measured(model: &Model) -> Vec<RaceKind> {
        model.graph_instantiated(EXEC, GRAPH);
        assert_eq!(model.graph_nodes_to_measure(EXEC, false), [1, 2]);
        let origin = Origin::test("cuGraphLaunch", 30);
        assert!(model.graph_launch_measured(EXEC, STREAM, &origin, &[(1, 11), (2, 12)]).is_empty());
        assert!(model.completed_launches().is_empty(), "the host has not synchronized");
        model.stream_synchronized(STREAM);
        assert_eq!(model.completed_launches(), [11, 12]);
        let write = [Access::new(BUFFER, 8, Mode::Write)];
        for ticket in [11, 12] {
            model.launch_measured(ticket, Some(Footprint { ranges: &write, covers: &[] }));
        }
        model.races().iter().map(|r| r.race.kind).collect()
    }

    /// A graph of kernel node 1 then node 2, launched once with both measured: no race.
    fn joined_and_measured() -> Model {
        let model = model();
        kernel_node(&model, 1, &[]);
        kernel_node(&model, 2, &[1]);
        assert!(launch_measured(&model).is_empty());
        model
    }

    /// Two kernel nodes on two branches, whose parameters name nothing, both measured
    /// writing one buffer: a race; joined by an edge: none. Either way each node keeps its
    /// footprint, and the next launch measures neither.
    #[test]
    fn kernel_nodes_on_two_branches_race_by_what_was_measured() {
        let racy = model();
        kernel_node(&racy, 1, &[]);
        kernel_node(&racy, 2, &[]);
        assert_eq!(launch_measured(&racy), [RaceKind::CrossStream]);
        assert!(racy.graph_nodes_to_measure(EXEC, false).is_empty());
        assert_eq!(racy.graph_nodes_to_measure(EXEC, true), [1, 2], "exact measures every launch");
        // Node 2 measured again at a second launch: node 1 is now the least recently measured.
        let origin = Origin::test("cuGraphLaunch", 31);
        assert!(racy.graph_launch_measured(EXEC, STREAM, &origin, &[(2, 13)]).is_empty());
        racy.stream_synchronized(STREAM);
        racy.launch_measured(13, Some(Footprint { ranges: &[], covers: &[] }));
        assert_eq!(racy.graph_nodes_to_measure(EXEC, true), [1, 2]);
        assert!(racy.graph_launch_measured(EXEC, STREAM, &origin, &[(1, 14)]).is_empty());
        racy.stream_synchronized(STREAM);
        racy.launch_measured(14, Some(Footprint { ranges: &[], covers: &[] }));
        assert_eq!(racy.graph_nodes_to_measure(EXEC, true), [2, 1]);

        joined_and_measured();
    }

    /// After the launch that measured them, an executable graph's kernel nodes are measured
    /// again at the launches a learnt key is checked at, and only there.
    #[test]
    fn kernel_nodes_are_checked_on_a_learnt_keys_schedule() {
        let m = joined_and_measured();
        let origin = Origin::test("cuGraphLaunch", 32);
        let mut checked = Vec::new();
        for launch in 2..=300u64 {
            if m.graph_nodes_to_measure(EXEC, false).len() == 2 {
                checked.push(launch);
            }
            m.graph_launch(EXEC, STREAM, &origin);
        }
        assert_eq!(checked, [4, 8, 16, 32, 64, 256]);
    }

    /// What a node's measurement showed stands for its parameters at a later launch that
    /// does not measure it: a memset on another stream racing with it is found.
    #[test]
    fn a_node_s_measured_footprint_stands_at_its_later_launches() {
        let model = joined_and_measured();
        model.graph_launch(EXEC, STREAM, &Origin::test("cuGraphLaunch", 31));
        model.stream_created(0x20, 1, true, &Origin::test("cuStreamCreate", 32));
        let write = [Access::new(BUFFER, 8, Mode::Write)];
        let origin = Origin::test("cuMemsetD8Async", 33);
        model.work(StreamRef::Handle(0x20), Work { origin, kernel: None, accesses: &write, host: HostEffect::None });
        assert_eq!(model.races().len(), 1, "{:?}", model.races());
    }

    /// A captured graph's kernel nodes are named by the driver's list only where it agrees
    /// with what was captured, kernel by kernel.
    #[test]
    fn captured_kernel_nodes_are_named_only_by_a_list_that_agrees() {
        let model = model();
        model.capture_begin(STREAM);
        for k in [1, 2] {
            let origin = Origin::test("cuLaunchKernel", 20 + k);
            let work = Work { origin, kernel: Some(KernelId(k)), accesses: &[], host: HostEffect::None };
            model.work(STREAM, work);
        }
        model.capture_end(STREAM, Some(0x6100));
        let k = |id| Some(KernelId(id));
        assert!(!model.graph_kernels_named(0x6100, &[(0xa, k(2)), (0xb, k(1))]));
        assert!(!model.graph_kernels_named(0x6100, &[(0xa, k(1))]));
        assert!(model.graph_kernels_named(0x6100, &[(0xa, k(1)), (0xb, k(2))]));
        model.graph_instantiated(EXEC, 0x6100);
        assert_eq!(model.graph_nodes_to_measure(EXEC, false), [0xa, 0xb]);
    }
}
