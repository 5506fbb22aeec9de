//! What the stand-in's graphs run: each graph's nodes in the order they were made, its kernel
//! nodes' parameters (copied, as the driver copies them), launches captured into kernel nodes
//! instead of running, an executable graph's own copy of its kernel nodes (edited by
//! `cuGraphExecKernelNodeSetParams`), and each graph launch running its kernel nodes in order,
//! as launches on its stream.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use streamsan_driver_api::*;

use crate::device::{state_read, Object};

/// A kernel node's parameters, as the driver keeps them.
#[derive(Clone)]
struct Kernel {
    params: KernelNodeParams,
    values: Vec<Vec<u8>>,
    /// One pointer per value: what `kernel_params` points at once the node is asked for.
    pointers: Vec<usize>,
}

// SAFETY: the handles are the stand-in's, valid on any thread; the parameters' pointer is
// set only in a copy handed to the caller.
unsafe impl Send for Kernel {}

impl Kernel {
    /// A copy of `p`, each parameter's bytes as `f`'s entry lays them out.
    ///
    /// # Safety
    /// `p.kernel_params` holds one pointer per parameter of its kernel, or is null.
    unsafe fn of(p: &KernelNodeParams) -> Option<Kernel> {
        let f = if p.func.is_null() { p.kern } else { p.func };
        let sizes: Vec<usize> = match state_read().objects.get(&(f as usize)) {
            Some(Object::Function { entry, .. } | Object::Kernel { entry, .. }) => {
                entry.params.iter().map(|p| p.size).collect()
            }
            _ => return None,
        };
        let values = if p.kernel_params.is_null() {
            Vec::new()
        } else {
            // SAFETY: the caller's promise.
            sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| unsafe { std::slice::from_raw_parts(*p.kernel_params.add(i) as *const u8, n) }.to_vec())
                .collect()
        };
        let mut kernel = Kernel { params: *p, values, pointers: Vec::new() };
        kernel.pointers = kernel.values.iter().map(|v| v.as_ptr() as usize).collect();
        Some(kernel)
    }

    fn function(&self) -> *mut c_void {
        if self.params.func.is_null() {
            self.params.kern
        } else {
            self.params.func
        }
    }
}

#[derive(Default)]
struct Graphs {
    /// Each graph's nodes, in the order they were made.
    nodes: HashMap<usize, Vec<usize>>,
    kernels: HashMap<usize, Kernel>,
    /// Each executable graph's kernel nodes, by node, in order.
    execs: HashMap<usize, Vec<(usize, Kernel)>>,
    /// Each capturing stream's capture, named by the stream that began it.
    capturing: HashMap<usize, usize>,
    /// Each capture's nodes so far, and the graph it captures into, if given.
    captures: HashMap<usize, (Option<usize>, Vec<usize>)>,
    /// Events last recorded in a capture, and that capture.
    events: HashMap<usize, usize>,
}

fn graphs() -> MutexGuard<'static, Graphs> {
    static GRAPHS: OnceLock<Mutex<Graphs>> = OnceLock::new();
    GRAPHS.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// `node` was added to `graph`.
pub fn node_added(graph: CUgraph, node: usize) {
    graphs().nodes.entry(graph as usize).or_default().push(node);
}

/// Kernel node `node` takes the parameters `p`.
///
/// # Safety
/// As [`Kernel::of`].
pub unsafe fn kernel_params(node: usize, p: &KernelNodeParams) {
    if let Some(kernel) = unsafe { Kernel::of(p) } {
        graphs().kernels.insert(node, kernel);
    }
}

/// `stream` begins capturing, into `graph` if given.
pub fn capture_began(stream: CUstream, graph: Option<CUgraph>) {
    let mut g = graphs();
    g.capturing.insert(stream as usize, stream as usize);
    g.captures.insert(stream as usize, (graph.map(|g| g as usize), Vec::new()));
}

/// `event` was recorded on `stream`: in its capture, if it captures.
pub fn recorded(event: CUevent, stream: CUstream) {
    let mut g = graphs();
    match g.capturing.get(&(stream as usize)).copied() {
        Some(capture) => g.events.insert(event as usize, capture),
        None => g.events.remove(&(event as usize)),
    };
}

/// `stream` waits for `event`: recorded in a capture, the stream joins it (whether it did).
pub fn waited(stream: CUstream, event: CUevent) -> bool {
    let mut g = graphs();
    let Some(capture) = g.events.get(&(event as usize)).copied() else { return false };
    g.capturing.insert(stream as usize, capture) != Some(capture)
}

/// A launch on `stream`, if it captures, becomes kernel node `node` (made by the caller).
/// Whether it did.
///
/// # Safety
/// As [`Kernel::of`].
pub unsafe fn captured(stream: CUstream, node: impl FnOnce() -> usize, p: &KernelNodeParams) -> bool {
    let Some(capture) = graphs().capturing.get(&(stream as usize)).copied() else { return false };
    let node = node();
    unsafe { kernel_params(node, p) };
    if let Some((_, nodes)) = graphs().captures.get_mut(&capture) {
        nodes.push(node);
    }
    true
}

/// `stream`'s capture ended, into `graph` (a new one, unless it captured into its own).
/// The streams that took part but `stream`, which capture no more.
pub fn capture_ended(stream: CUstream, graph: Option<CUgraph>) -> Vec<usize> {
    let mut g = graphs();
    let Some(capture) = g.capturing.get(&(stream as usize)).copied() else { return Vec::new() };
    let members: Vec<usize> = g.capturing.iter().filter(|&(_, &c)| c == capture).map(|(&s, _)| s).collect();
    g.capturing.retain(|_, c| *c != capture);
    g.events.retain(|_, c| *c != capture);
    if let Some((target, nodes)) = g.captures.remove(&capture) {
        if let Some(graph) = target.or(graph.map(|g| g as usize)) {
            g.nodes.entry(graph).or_default().extend(nodes);
        }
    }
    members.into_iter().filter(|&s| s != stream as usize).collect()
}

/// `graph`'s nodes, in the order they were made.
pub fn nodes(graph: CUgraph) -> Vec<usize> {
    graphs().nodes.get(&(graph as usize)).cloned().unwrap_or_default()
}

/// Kernel node `node`'s parameters, into `out`; false if it is no kernel node.
///
/// # Safety
/// `out` is valid for a write.
pub unsafe fn get_params(node: usize, out: *mut KernelNodeParams) -> bool {
    let g = graphs();
    let Some(kernel) = g.kernels.get(&node) else { return false };
    let mut params = kernel.params;
    params.kernel_params = kernel.pointers.as_ptr() as *mut *mut c_void;
    // SAFETY: the caller's promise.
    unsafe { out.write(params) };
    true
}

/// `graph` was instantiated as `exec`: its kernel nodes, as they are now.
pub fn instantiated(exec: usize, graph: CUgraph) {
    let mut g = graphs();
    let nodes = g.nodes.get(&(graph as usize)).cloned().unwrap_or_default();
    let kernels = nodes.iter().filter_map(|n| g.kernels.get(n).map(|k| (*n, k.clone()))).collect();
    g.execs.insert(exec, kernels);
}

/// Kernel node `node` of `exec` takes the parameters `p`. Whether `exec` has that node.
///
/// # Safety
/// As [`Kernel::of`].
pub unsafe fn exec_params(exec: CUgraphExec, node: CUgraphNode, p: &KernelNodeParams) -> bool {
    let Some(kernel) = (unsafe { Kernel::of(p) }) else { return false };
    let mut g = graphs();
    let Some(slot) = g.execs.get_mut(&(exec as usize)).and_then(|k| k.iter_mut().find(|(n, _)| *n == node as usize))
    else {
        return false;
    };
    slot.1 = kernel;
    true
}

/// The kernel nodes of `exec`, in order: (function, parameter values).
pub fn launch(exec: CUgraphExec) -> Vec<(*mut c_void, Vec<Vec<u8>>)> {
    let g = graphs();
    let kernels = g.execs.get(&(exec as usize)).map(Vec::as_slice).unwrap_or_default();
    kernels.iter().map(|(_, k)| (k.function(), k.values.clone())).collect()
}
