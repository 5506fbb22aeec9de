//! Kernel nodes of graph launches measured (`footprint=exact|learn`): each executable
//! graph's kernel nodes, their parameters copied as it was instantiated, and the launch that
//! sends the nodes to measure to their twins' functions for that launch alone, setting the
//! program's functions back before the next.

use core::ffi::{c_void, CStr};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use streamsan::model::streams::StreamRef;
use streamsan_driver_api::*;
use streamsan_footprint as engine;

use super::call::{handle_of, ok, origin};
use super::footprint;
use super::kernels;
use super::model::model;
use crate::intercept::driver;
use crate::intercept::variants::Call;

/// A kernel node of an executable graph, as it was instantiated (or its parameters last
/// set): what the node is set back to after a launch that measured it.
struct Copied {
    node: CUgraphNode,
    /// A `CUfunction`, or a `CUkernel` where the node named its kernel by `kern` alone.
    function: *mut c_void,
    by_kern: bool,
    ctx: CUcontext,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    /// Each parameter's bytes, in order.
    values: Vec<Vec<u8>>,
}

// SAFETY: the handles are the driver's, valid on any thread.
unsafe impl Send for Copied {}

impl Copied {
    /// A copy of `p`, a kernel node's parameters; None if its parameters' layout is not
    /// known (the driver could not say, or they come as an `extra` buffer).
    ///
    /// # Safety
    /// `p` holds parameters the driver accepted.
    unsafe fn of(node: CUgraphNode, p: &KernelNodeParams) -> Option<Copied> {
        let (function, by_kern) = if p.func.is_null() { (p.kern, true) } else { (p.func, false) };
        if function.is_null() || !p.extra.is_null() {
            return None;
        }
        let info = kernels::info(model(), function);
        // No layout with parameters given: their sizes are unknown, the kernel may take some.
        if info.params.is_empty() != p.kernel_params.is_null() {
            return None;
        }
        let values = info
            .params
            .iter()
            .enumerate()
            .map(|(i, param)| {
                // SAFETY: one pointer per parameter, each to `size` bytes (the driver's layout).
                let value = unsafe { *p.kernel_params.add(i) } as *const u8;
                (!value.is_null()).then(|| unsafe { core::slice::from_raw_parts(value, param.size) }.to_vec())
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Copied {
            node,
            function,
            by_kern,
            ctx: p.ctx,
            grid: p.grid_dim,
            block: p.block_dim,
            shared: p.shared_mem_bytes,
            values,
        })
    }

    /// Sets the node of `exec` to run `twin` (None: the program's own function) with the
    /// copied parameters, through the real driver. Whether the driver accepted it.
    fn set(&self, set: SetParams, exec: CUgraphExec, twin: Option<*mut c_void>) -> bool {
        let mut pointers: Vec<*mut c_void> = self.values.iter().map(|v| v.as_ptr() as *mut c_void).collect();
        let (func, kern) = match twin {
            Some(twin) => (twin, core::ptr::null_mut()),
            None if self.by_kern => (core::ptr::null_mut(), self.function),
            None => (self.function, core::ptr::null_mut()),
        };
        let params = KernelNodeParams {
            func,
            grid_dim: self.grid,
            block_dim: self.block,
            shared_mem_bytes: self.shared,
            kernel_params: if pointers.is_empty() { core::ptr::null_mut() } else { pointers.as_mut_ptr() },
            extra: core::ptr::null_mut(),
            kern,
            ctx: self.ctx,
        };
        // SAFETY: a real driver function; the parameters and their values live across the
        // call, which copies them.
        ok(unsafe { set(exec, self.node, &params) })
    }
}

type GetNodes = unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut usize) -> CUresult;
type GetParams = unsafe extern "C" fn(CUgraphNode, *mut KernelNodeParams) -> CUresult;
type SetParams = unsafe extern "C" fn(CUgraphExec, CUgraphNode, *const KernelNodeParams) -> CUresult;

/// The real driver's graph queries and the executable graph's node update.
#[derive(Clone, Copy)]
struct Driver {
    get_nodes: GetNodes,
    get_params: GetParams,
    set_params: SetParams,
}

fn real() -> Option<Driver> {
    static REAL: OnceLock<Option<Driver>> = OnceLock::new();
    *REAL.get_or_init(|| {
        fn find<F: Copy>(name: &CStr) -> Option<F> {
            let f = driver::lookup(name);
            // SAFETY: F is the driver's signature for `name` (cuda.h).
            (!f.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, F>(&f) })
        }
        Some(Driver {
            get_nodes: find(c"cuGraphGetNodes")?,
            get_params: find(c"cuGraphKernelNodeGetParams_v2")?,
            set_params: find(c"cuGraphExecKernelNodeSetParams_v2")?,
        })
    })
}

/// An executable graph's kernel nodes: every node's function (the engine measures a node
/// whose module has variables only where no other node runs that module's code), and the
/// copies of those that can be measured.
#[derive(Default)]
struct Exec {
    functions: Vec<(CUgraphNode, *mut c_void)>,
    nodes: Vec<Copied>,
}

// SAFETY: the handles are the driver's, valid on any thread.
unsafe impl Send for Exec {}

/// Each executable graph's kernel nodes.
static EXECS: Mutex<Option<HashMap<u64, Exec>>> = Mutex::new(None);

fn execs<T>(f: impl FnOnce(&mut HashMap<u64, Exec>) -> T) -> T {
    f(EXECS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new))
}

/// `graph` was instantiated as `exec`, before the model hears of it: its kernel nodes, as the
/// driver lists them, name the model's (a capture's nodes have no handle the model saw),
/// and their parameters are copied.
pub fn instantiated(exec: CUgraphExec, graph: CUgraph) {
    if !footprint::active() || super::load_gate::capturing() {
        return;
    }
    let Some(driver) = real() else { return };
    let mut count = 0usize;
    // SAFETY: real driver functions and valid out-pointers; `nodes` holds `count` handles.
    if !ok(unsafe { (driver.get_nodes)(graph, core::ptr::null_mut(), &mut count) }) {
        return;
    }
    let mut nodes: Vec<CUgraphNode> = vec![core::ptr::null_mut(); count];
    if count > 0 && !ok(unsafe { (driver.get_nodes)(graph, nodes.as_mut_ptr(), &mut count) }) {
        return;
    }
    nodes.truncate(count);
    let model = model();
    let mut named = Vec::new();
    let mut kernels = Exec::default();
    for node in nodes {
        // SAFETY: all-zero is a valid KernelNodeParams (null handles and pointers).
        let mut params: KernelNodeParams = unsafe { core::mem::zeroed() };
        // Not a kernel node: the driver refuses.
        // SAFETY: a real driver function and a valid out-pointer.
        if !ok(unsafe { (driver.get_params)(node, &mut params) }) {
            continue;
        }
        let function = if params.func.is_null() { params.kern } else { params.func };
        named.push((node as u64, kernels::info(model, function).id));
        kernels.functions.push((node, function));
        // SAFETY: the parameters the driver holds for the node, live until it changes.
        kernels.nodes.extend(unsafe { Copied::of(node, &params) });
    }
    if model.graph_kernels_named(graph as u64, &named) {
        execs(|e| e.insert(exec as u64, kernels));
    }
}

/// `exec` is destroyed, or now runs another graph's parameters (`cuGraphExecUpdate`): its
/// nodes are no longer measured.
pub fn forget(exec: CUgraphExec) {
    if footprint::active() {
        execs(|e| e.remove(&(exec as u64)));
    }
}

/// The program set the parameters of kernel node `node` of `exec`: the copy follows.
///
/// # Safety
/// `params` holds parameters the driver accepted.
pub unsafe fn params_set(exec: CUgraphExec, node: CUgraphNode, params: *const KernelNodeParams) {
    if !footprint::active() {
        return;
    }
    // SAFETY: the caller's promise.
    let copy = unsafe { params.as_ref().and_then(|p| Copied::of(node, p)) };
    // SAFETY: as above.
    let function = unsafe { params.as_ref() }.map(|p| if p.func.is_null() { p.kern } else { p.func });
    execs(|e| {
        if let Some(kernels) = e.get_mut(&(exec as u64)) {
            kernels.nodes.retain(|c| c.node != node);
            kernels.nodes.extend(copy);
            for (n, f) in kernels.functions.iter_mut() {
                if *n == node {
                    *f = function.unwrap_or(*f);
                }
            }
        }
    });
}

/// `cuGraphLaunch(exec, stream)` through `launch` (the real call): the kernel nodes the
/// model asks to measure run on their twins for this launch; a launch the driver refuses
/// with twins is made again as the program made it. The driver's status, and the (node
/// handle, ticket) of each node measured.
pub fn launch(exec: CUgraphExec, on: StreamRef, launch: impl Fn() -> CUresult) -> (CUresult, Vec<(u64, u64)>) {
    if !footprint::active() || super::load_gate::capturing() {
        return (launch(), Vec::new());
    }
    let Some(driver) = real() else { return (launch(), Vec::new()) };
    if !execs(|e| e.contains_key(&(exec as u64))) {
        return (launch(), Vec::new());
    }
    let wanted = model().graph_nodes_to_measure(exec as u64, footprint::measures_every_launch());
    if wanted.is_empty() {
        return (launch(), Vec::new());
    }
    // In the model's order: of two nodes of one kernel, the one first asked for is measured.
    let (mut taken, graph): (Vec<Copied>, Vec<*mut c_void>) = execs(|e| {
        let Some(kernels) = e.get_mut(&(exec as u64)) else { return Default::default() };
        let (taken, kept) =
            std::mem::take(&mut kernels.nodes).into_iter().partition(|c| wanted.contains(&(c.node as u64)));
        kernels.nodes = kept;
        (taken, kernels.functions.iter().map(|&(_, f)| f).collect())
    });
    taken.sort_by_key(|c| wanted.iter().position(|&w| w == c.node as u64));
    let status = measured(driver, exec, on, &mut taken, &graph, launch);
    execs(|e| {
        if let Some(kernels) = e.get_mut(&(exec as u64)) {
            kernels.nodes.extend(taken);
        }
    });
    status
}

/// Launches `exec` with `nodes` sent to their twins where they can be (`graph`: the
/// functions of all its kernel nodes). A node whose kernel can have no twin (its module's
/// state, or no code to load) leaves `nodes`: it is not asked for again.
fn measured(
    driver: Driver,
    exec: CUgraphExec,
    on: StreamRef,
    nodes: &mut Vec<Copied>,
    graph: &[*mut c_void],
    launch: impl Fn() -> CUresult,
) -> (CUresult, Vec<(u64, u64)>) {
    if nodes.is_empty() {
        return (launch(), Vec::new());
    }
    let functions: Vec<*mut c_void> = nodes.iter().map(|c| c.function).collect();
    let stream = handle_of(on) as *mut c_void;
    let Some(mut armed) = engine::arm_nodes(&functions, graph, stream, super::load_gate::open()) else {
        return (launch(), Vec::new());
    };
    // Noted once the engine let go of its lock (the model may wait for other threads).
    let mut unmeasured = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        match armed.nodes[i] {
            Ok(armed_node) if !node.set(driver.set_params, exec, Some(armed_node.twin)) => {
                armed.unarm(i);
                unmeasured.push(engine::Unmeasured::Refused);
            }
            Ok(_) => {}
            Err(why) => unmeasured.push(why),
        }
    }
    let sent: Vec<usize> = (0..nodes.len()).filter(|&i| armed.nodes[i].is_ok()).collect();
    let status = launch();
    // The update holds from the next launch on: this one runs the twins.
    for &i in &sent {
        if !nodes[i].set(driver.set_params, exec, None) {
            crate::intercept::diag::warn("a graph's kernel node could not be set back to its own function");
        }
    }
    let never: Vec<bool> = armed
        .nodes
        .iter()
        .map(|n| matches!(n, Err(engine::Unmeasured::NoTwin(engine::NoTwin::ModuleState | engine::NoTwin::NoCode))))
        .collect();
    let tickets = armed.finish(ok(status));
    for why in unmeasured {
        footprint::note_unmeasured(why);
    }
    let tickets = tickets.into_iter().map(|(i, ticket)| (nodes[i].node as u64, ticket.0)).collect();
    let mut keep = never.iter().map(|&never| !never);
    nodes.retain(|_| keep.next().unwrap_or(true));
    if !ok(status) && !sent.is_empty() {
        footprint::note_unmeasured(engine::Unmeasured::Refused);
        return (launch(), Vec::new());
    }
    (status, tickets)
}

/// A graph launch the model took, `measured` its nodes' tickets: those that wait for no
/// footprint (the graph is not followed) go back unread.
pub fn launched(call: &Call, exec: CUgraphExec, on: StreamRef, measured: &[(u64, u64)]) {
    let unread = model().graph_launch_measured(exec as u64, on, &origin(call), measured);
    for ticket in unread {
        footprint::discard(ticket);
    }
}
