//! Kernel nodes of a graph launch measured on twins: before the launch each node to measure
//! is given its twin's function (the caller sets it on the executable graph, and sets the
//! program's back after the launch), with a table bound to the twin's function. A table is
//! bound per function, so two nodes of one launch never share a twin's function: the second
//! is measured at a later launch. A module's variables are copied into its twin before the
//! whole graph and back after it, so a node whose module has variables is measured only
//! where no other node of the graph runs that module's code (which would meet the program's
//! copies while the twin's node changed its own).

use core::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Instant;

use crate::api::Handle;
use crate::engine::{self, Ticket, Unmeasured, ENGINE};
use crate::twins::{self, NoTwin};

/// The threads taken for a node's launch, whose grid is not read: it takes a wide table where
/// any launch of its kernel filled one ([`engine::Engine::wants_wide`]).
const NODE_THREADS: u64 = u64::MAX;

/// A node sent to a twin: the twin's function to set on the node, its launch's ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeArmed {
    pub twin: *mut c_void,
    pub ticket: Ticket,
}

/// The nodes of one graph launch sent to twins, from [`arm_nodes`] to [`NodesArmed::finish`],
/// which must follow the launch's real call.
pub struct NodesArmed {
    /// Per function asked for, in order: its node's twin and ticket, or why it is not
    /// measured.
    pub nodes: Vec<Result<NodeArmed, Unmeasured>>,
    /// The program's functions of the nodes sent to twins (for a `CUkernel`, its function
    /// in the context).
    own: Vec<Handle>,
    /// The nodes whose module's variables were copied into their twins, by index, to be
    /// copied back after the launch.
    mirrored: Vec<(usize, twins::Pair)>,
    ctx: Handle,
    stream: Handle,
    _measuring: MutexGuard<'static, ()>,
}

/// Before a graph launch on `stream`, outside any callback: a twin and a table for each
/// kernel node whose program's function (or `CUkernel`) is in `functions`; `graph`: the
/// functions of every kernel node of the graph, one per node. `may_load` as for
/// [`engine::arm`]. None: nothing is measured (no engine, no context, or the stream
/// captures: the launch becomes a node of another graph).
pub fn arm_nodes(functions: &[Handle], graph: &[Handle], stream: Handle, may_load: bool) -> Option<NodesArmed> {
    let engine = ENGINE.get()?;
    let retired = std::mem::take(&mut engine.twins().retired);
    if !retired.is_empty() {
        twins::unload(&engine.driver.twins, retired);
    }
    arm(engine, functions, graph, stream, may_load)
}

/// Whether `f` is the only node that runs its module's code, of a graph whose nodes' modules
/// are `modules`.
fn alone_in_module(engine: &engine::Engine, f: Handle, modules: &[Option<Handle>]) -> bool {
    let Some(module) = twins::module_of(&engine.driver.twins, f) else { return false };
    modules.iter().filter(|&&m| m == Some(module)).count() == 1
}

fn arm(
    engine: &'static engine::Engine,
    functions: &[Handle],
    graph: &[Handle],
    stream: Handle,
    may_load: bool,
) -> Option<NodesArmed> {
    let mut capturing = 0u32;
    // SAFETY: a real driver function and a valid out-pointer.
    if unsafe { (engine.driver.stream_is_capturing)(stream, &mut capturing) } != 0 || capturing != 0 {
        return None;
    }
    let mut ctx: Handle = core::ptr::null_mut();
    // SAFETY: a real driver function and a valid out-pointer.
    if unsafe { (engine.driver.ctx_get_current)(&mut ctx) } != 0 || ctx.is_null() {
        return None;
    }
    let started = Instant::now();
    // Asked of the driver only where a node's module has variables.
    let modules = std::cell::OnceCell::new();
    let modules = || -> &Vec<Option<Handle>> {
        modules.get_or_init(|| graph.iter().map(|&g| twins::module_of(&engine.driver.twins, g)).collect())
    };
    // Each node's pair, and whether its launches take wide tables.
    let pairs: Vec<Result<(twins::Pair, bool), Unmeasured>> = functions
        .iter()
        .map(|&f| {
            let pair =
                twins::pair(&engine.driver.twins, &engine.twins, f, ctx, may_load).map_err(Unmeasured::NoTwin)?;
            if !pair.variables.is_empty() && !alone_in_module(engine, f, modules()) {
                return Err(Unmeasured::NoTwin(NoTwin::ModuleState));
            }
            twins::copy_attributes(&engine.driver.twins, &pair);
            let wide = engine.wants_wide(&pair, NODE_THREADS);
            match engine::prepare(engine, ctx, wide, may_load) {
                Ok(true) => Ok((pair, wide)),
                Ok(false) => Err(Unmeasured::NoTable),
                Err(why) => Err(why),
            }
        })
        .collect();
    engine.twins_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let measuring = engine.measuring.lock().unwrap_or_else(|e| e.into_inner());
    let mut bound: Vec<Handle> = Vec::new();
    let mut own = Vec::with_capacity(pairs.len());
    let mut mirrored = Vec::new();
    let nodes = pairs
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let (pair, wide) = pair?;
            if bound.contains(&pair.twin) {
                return Err(Unmeasured::NotNow);
            }
            let ticket = engine.launch_table(ctx, &pair, wide, NODE_THREADS).ok_or(Unmeasured::NoTable)?;
            if !pair.variables.is_empty() {
                if !engine.mirror(ctx, &pair, stream, true) {
                    engine::discard(ticket);
                    return Err(Unmeasured::NoTwin(NoTwin::ModuleState));
                }
                mirrored.push((i, pair.clone()));
            }
            engine.bind(&pair, ticket);
            bound.push(pair.twin);
            own.push(pair.own);
            Ok(NodeArmed { twin: pair.twin, ticket })
        })
        .collect();
    Some(NodesArmed { nodes, own, mirrored, ctx, stream, _measuring: measuring })
}

impl NodesArmed {
    /// Node `i` keeps the program's function (the driver refused the twin's): its table
    /// goes back unread.
    pub fn unarm(&mut self, i: usize) {
        if let Some(Ok(node)) = self.nodes.get(i) {
            engine::discard(node.ticket);
            self.nodes[i] = Err(Unmeasured::Refused);
            self.mirrored.retain(|(node, _)| *node != i);
        }
    }

    /// After the graph launch's real call, with whether the driver accepted it: the tickets
    /// of the nodes measured, by the index of their function. A launch the driver refused
    /// ran nothing: its tables go back, and the caller launches the program's own graph.
    pub fn finish(self, accepted: bool) -> Vec<(usize, Ticket)> {
        let Some(engine) = ENGINE.get() else { return Vec::new() };
        let NodesArmed { nodes, own, mirrored, ctx, stream, _measuring } = self;
        // What the twins' nodes changed goes back, ordered after the graph on its stream (a
        // launch refused ran nothing: the twins hold the program's values still).
        if accepted {
            for (_, pair) in &mirrored {
                engine.mirror(ctx, pair, stream, false);
            }
        }
        drop(_measuring);
        let armed: Vec<(usize, Ticket)> =
            nodes.iter().enumerate().filter_map(|(i, n)| n.as_ref().ok().map(|n| (i, n.ticket))).collect();
        if !accepted {
            if !armed.is_empty() {
                engine.refused.fetch_add(1, Ordering::Relaxed);
            }
            for &(_, ticket) in &armed {
                engine::discard(ticket);
            }
            return Vec::new();
        }
        let mut twins = engine.twins();
        for function in own {
            twins::launched(&mut twins, function, ctx);
        }
        armed
    }
}
