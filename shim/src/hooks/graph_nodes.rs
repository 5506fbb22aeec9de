//! Graphs built with the explicit graph API: nodes, edges, parameters, updates and captures
//! into an existing graph (`docs/semantics.md#capture-and-graphs`). A node means what the
//! same operation means on a stream; one whose parameters do not say what it touches makes
//! the graph one the model does not follow.

use core::ffi::c_uint;

use streamsan::model::definition::AddedNode;
use streamsan::model::definition::NodeKind;
use streamsan::model::op::{GridWait, KernelId};
use streamsan_driver_api::*;

use super::call::{ok, origin, stream};
use super::copies::copy_3d_accesses;
use super::kernels;
use super::memsets::push_set_accesses;
use super::model::model;
use super::programmatic;
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`.
const SET_CAPTURE_DEPENDENCIES: c_uint = 0x1;

/// What a node does: its kind, and for a kernel node its kernel and whether the kernel's
/// code waits on its grid dependencies.
pub type Does = (NodeKind, Option<KernelId>, GridWait);

/// `n` node handles from the caller's array.
unsafe fn handles(nodes: *const CUgraphNode, n: usize) -> Vec<u64> {
    if nodes.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's array of `n` nodes, which the driver accepted.
    (0..n).map(|i| unsafe { *nodes.add(i) } as u64).collect()
}

/// A node the driver added after `deps`, whose edges `edge_data` describes (null: ordinary
/// ones): tells the model, with what it does.
unsafe fn added(
    call: &Call,
    node: *mut CUgraphNode,
    graph: CUgraph,
    (deps, edge_data, num_deps): (*const CUgraphNode, *const GraphEdgeData, usize),
    what: Does,
    child: Option<CUgraph>,
) {
    // SAFETY: the driver wrote the new node's handle.
    let Some(&handle) = (unsafe { node.as_ref() }) else {
        return;
    };
    let (deps, programmatic) = unsafe { (handles(deps, num_deps), programmatic(edge_data, num_deps)) };
    let (kind, kernel, grid_wait) = what;
    let node = AddedNode {
        graph: graph as u64,
        handle: handle as u64,
        deps: &deps,
        programmatic: &programmatic,
        kind,
        origin: origin(call),
        kernel,
        grid_wait,
    };
    model().graph_node_added(node, child.map(|c| c as u64));
}

/// The parameters of a node that does work: what the node does.
pub trait NodeParams {
    unsafe fn node(call: &Call, params: *const Self) -> Option<Does>;
}

impl NodeParams for KernelNodeParams {
    /// The `_v2` parameters may name the kernel by `kern` alone.
    unsafe fn node(call: &Call, params: *const Self) -> Option<Does> {
        // SAFETY: the parameters the driver accepted.
        Some(unsafe { kernel_node(params.as_ref()?, call.name().contains("_v2")) })
    }
}

/// A kernel node with parameters `p`: the accesses of its parameters. `by_kern`: the
/// parameters may name the kernel by `kern` alone (`_v2` and later).
///
/// # Safety
/// `p` holds parameters the driver accepted.
unsafe fn kernel_node(p: &KernelNodeParams, by_kern: bool) -> Does {
    let f = if p.func.is_null() && by_kern { p.kern } else { p.func };
    let model = model();
    let info = kernels::info(model, f);
    let mut accesses = Vec::new();
    unsafe { kernels::accesses(model, &info, p.kernel_params, p.extra, &mut accesses) };
    (NodeKind::Work { accesses }, info.id, programmatic::grid_wait(f))
}

impl NodeParams for Memcpy3D {
    unsafe fn node(_call: &Call, copy: *const Self) -> Option<Does> {
        // SAFETY: the descriptor the driver accepted.
        let copy = unsafe { copy.as_ref()? };
        Some((NodeKind::Work { accesses: copy_3d_accesses(copy) }, None, GridWait::Unseen))
    }
}

impl NodeParams for MemsetNodeParams {
    unsafe fn node(_call: &Call, params: *const Self) -> Option<Does> {
        // SAFETY: the parameters the driver accepted.
        let p = unsafe { params.as_ref()? };
        let mut accesses = Vec::new();
        push_set_accesses(&mut accesses, p.dst, p.pitch, p.width * p.element_size as usize, p.height);
        Some((NodeKind::Work { accesses }, None, GridWait::Unseen))
    }
}

pub unsafe fn graph_create(_call: &Call, real: real::graph_create, graph: *mut CUgraph, flags: c_uint) -> CUresult {
    let status = unsafe { real(graph, flags) };
    if ok(status) && !graph.is_null() {
        model().graph_created(unsafe { *graph } as u64);
    }
    status
}

pub unsafe fn graph_clone(_call: &Call, real: real::graph_clone, clone: *mut CUgraph, original: CUgraph) -> CUresult {
    let status = unsafe { real(clone, original) };
    if ok(status) && !clone.is_null() {
        model().graph_cloned(unsafe { *clone } as u64, original as u64);
    }
    status
}

/// Expands the calls that add one node after its dependencies, one line each: the family,
/// the arguments it has after them, what the node does (read once the driver added it; none:
/// the node is not told) and, for a child graph node, the graph it embeds.
macro_rules! add_nodes {
    ($(
        $(#[$doc:meta])* $family:ident ($call:ident $(, $arg:ident: $ty:ty)*) => $what:expr $(, embeds $child:ident)?;
    )*) => {$(
        $(#[$doc])*
        pub unsafe fn $family(
            $call: &Call,
            real: real::$family,
            node: *mut CUgraphNode,
            graph: CUgraph,
            deps: *const CUgraphNode,
            num_deps: usize,
            $($arg: $ty,)*
        ) -> CUresult {
            let status = unsafe { real(node, graph, deps, num_deps, $($arg),*) };
            if ok(status) {
                if let Some(what) = $what {
                    let deps = (deps, core::ptr::null(), num_deps);
                    unsafe { added($call, node, graph, deps, what, add_nodes!(@child $($child)?)) };
                }
            }
            status
        }
    )*};
    (@child) => { None };
    (@child $child:ident) => { Some($child) };
}

add_nodes! {
    graph_add_kernel_node(call, params: *const KernelNodeParams) => unsafe { NodeParams::node(call, params) };
    graph_add_memcpy_node(call, copy: *const Memcpy3D, ctx: CUcontext) => unsafe { NodeParams::node(call, copy) };
    graph_add_memset_node(call, set: *const MemsetNodeParams, ctx: CUcontext) => unsafe { NodeParams::node(call, set) };
    graph_add_host_node(call, params: *const CUDA_HOST_NODE_PARAMS) => Some((NodeKind::Empty, None, GridWait::Unseen));
    graph_add_empty_node(call) => Some((NodeKind::Empty, None, GridWait::Unseen));
    graph_add_child_graph_node(call, child: CUgraph) => Some((NodeKind::Empty, None, GridWait::Unseen)), embeds child;
    graph_add_event_record_node(call, event: CUevent) => Some((NodeKind::RecordEvent { event: event as u64 }, None, GridWait::Unseen));
    graph_add_event_wait_node(call, event: CUevent) => Some((NodeKind::WaitEvent { event: event as u64 }, None, GridWait::Unseen));
    /// The driver chooses the address (in `params.dptr`) when the node is added; the memory is
    /// the graph's from then on, allocated by the node at each launch.
    // SAFETY: the parameters the driver filled in.
    graph_add_mem_alloc_node(call, params: *mut MemAllocNodeParams) => unsafe { params.as_ref() }.map(|p| {
        let kind = NodeKind::Alloc { base: p.dptr, size: p.bytesize as u64, ctx: driver::current_context() };
        (kind, None, GridWait::Unseen)
    });
    graph_add_mem_free_node(call, dptr: CUdeviceptr) => Some((NodeKind::Free { base: dptr }, None, GridWait::Unseen));
}

/// `cuGraphAddBatchMemOpNode`: its operations' addresses are not read, so the model stops
/// following the graph.
pub unsafe fn graph_add_batch_mem_op_node(
    _call: &Call,
    real: real::graph_add_batch_mem_op_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const CUDA_BATCH_MEM_OP_NODE_PARAMS,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    if ok(status) {
        model().graph_opaque_node_added(graph as u64);
    }
    status
}

pub unsafe fn graph_add_node(
    call: &Call,
    real: real::graph_add_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *mut GraphNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    if ok(status) {
        unsafe { generic_added(call, node, graph, (deps, core::ptr::null(), num_deps), params) };
    }
    status
}

pub unsafe fn graph_add_node_v2(
    call: &Call,
    real: real::graph_add_node_v2,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    edge_data: *const GraphEdgeData,
    num_deps: usize,
    params: *mut GraphNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, edge_data, num_deps, params) };
    if ok(status) {
        unsafe { generic_added(call, node, graph, (deps, edge_data, num_deps), params) };
    }
    status
}

/// A node `cuGraphAddNode` added: a kernel node is told as `cuGraphAddKernelNode`'s; a node
/// of another type (its parameters not read) makes the graph one the model does not follow.
unsafe fn generic_added(
    call: &Call,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: (*const CUgraphNode, *const GraphEdgeData, usize),
    params: *const GraphNodeParams,
) {
    // SAFETY: the parameters the driver accepted.
    match unsafe { params.as_ref() } {
        Some(p) if p.type_ == CU_GRAPH_NODE_TYPE_KERNEL => unsafe {
            added(call, node, graph, deps, kernel_node(&p.kernel, true), None)
        },
        _ => model().graph_opaque_node_added(graph as u64),
    }
}

/// Whether each of `n` edges lets its downstream node start before its upstream one
/// completes: of the programmatic type, or from a kernel node's port other than its
/// completion (`docs/semantics.md#programmatic-dependent-launch`). None where `data` is null.
unsafe fn programmatic(data: *const GraphEdgeData, n: usize) -> Vec<bool> {
    if data.is_null() {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            // SAFETY: the caller's array of `n` edges, which the driver accepted.
            let edge = unsafe { *data.add(i) };
            edge.type_ == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || edge.from_port != CU_GRAPH_KERNEL_NODE_PORT_DEFAULT
        })
        .collect()
}

unsafe fn edges(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    data: *const GraphEdgeData,
    num: usize,
    add: bool,
) {
    let (from, to, programmatic) = unsafe { (handles(from, num), handles(to, num), programmatic(data, num)) };
    model().graph_edges(graph as u64, &from, &to, &programmatic, add);
}

/// `cuGraphAddDependencies` and `cuGraphRemoveDependencies`, with edge data (`_v2`) or
/// without: the edges told once the driver changed them.
macro_rules! dependencies {
    ($family:ident, add: $add:literal $(, $edge_data:ident)?) => {
        pub unsafe fn $family(
            _call: &Call,
            real: real::$family,
            graph: CUgraph,
            from: *const CUgraphNode,
            to: *const CUgraphNode,
            $($edge_data: *const GraphEdgeData,)?
            num: usize,
        ) -> CUresult {
            let status = unsafe { real(graph, from, to, $($edge_data,)? num) };
            if ok(status) {
                unsafe { edges(graph, from, to, dependencies!(@data $($edge_data)?), num, $add) };
            }
            status
        }
    };
    (@data) => { core::ptr::null() };
    (@data $edge_data:ident) => { $edge_data };
}

dependencies!(graph_add_dependencies, add: true);
dependencies!(graph_add_dependencies_v2, add: true, edge_data);
dependencies!(graph_remove_dependencies, add: false);
dependencies!(graph_remove_dependencies_v2, add: false, edge_data);

pub unsafe fn graph_destroy_node(_call: &Call, real: real::graph_destroy_node, node: CUgraphNode) -> CUresult {
    let status = unsafe { real(node) };
    if ok(status) {
        model().graph_node_destroyed(node as u64);
    }
    status
}

// One handler serves kernel, memcpy and memset nodes alike: `P` is the node's parameters.
pub use {
    node_set_params as graph_kernel_node_set_params, node_set_params as graph_memcpy_node_set_params,
    node_set_params as graph_memset_node_set_params,
};

pub unsafe fn node_set_params<P: NodeParams>(
    call: &Call,
    real: unsafe extern "C" fn(CUgraphNode, *const P) -> CUresult,
    node: CUgraphNode,
    params: *const P,
) -> CUresult {
    let status = unsafe { real(node, params) };
    if let (true, Some((kind, kernel, grid_wait))) = (ok(status), unsafe { P::node(call, params) }) {
        model().graph_node_params(node as u64, kind, kernel, grid_wait);
    }
    status
}

pub unsafe fn graph_exec_kernel_node_set_params(
    call: &Call,
    real: real::graph_exec_kernel_node_set_params,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const KernelNodeParams,
) -> CUresult {
    let status = unsafe { real(exec, node, params) };
    if ok(status) {
        // SAFETY: the parameters the driver accepted.
        unsafe { super::graph_footprint::params_set(exec, node, params) };
    }
    if let (true, Some((kind, kernel, grid_wait))) = (ok(status), unsafe { NodeParams::node(call, params) }) {
        model().exec_node_params(exec as u64, node as u64, kind, kernel, grid_wait);
    }
    status
}

// One handler serves memcpy and memset nodes alike: `P` is the node's parameters.
pub use {
    exec_node_set_params_in_context as graph_exec_memcpy_node_set_params,
    exec_node_set_params_in_context as graph_exec_memset_node_set_params,
};

/// A memcpy or memset node of an executable graph, which names the context it runs in.
pub unsafe fn exec_node_set_params_in_context<P: NodeParams>(
    call: &Call,
    real: unsafe extern "C" fn(CUgraphExec, CUgraphNode, *const P, CUcontext) -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const P,
    ctx: CUcontext,
) -> CUresult {
    let status = unsafe { real(exec, node, params, ctx) };
    if let (true, Some((kind, kernel, grid_wait))) = (ok(status), unsafe { P::node(call, params) }) {
        model().exec_node_params(exec as u64, node as u64, kind, kernel, grid_wait);
    }
    status
}

pub unsafe fn graph_exec_update(
    _call: &Call,
    real: real::graph_exec_update,
    exec: CUgraphExec,
    graph: CUgraph,
    result_info: *mut CUgraphExecUpdateResultInfo,
) -> CUresult {
    let status = unsafe { real(exec, graph, result_info) };
    if ok(status) {
        super::graph_footprint::forget(exec);
        model().exec_updated(exec as u64, graph as u64);
    }
    status
}

pub unsafe fn graph_exec_update_v1(
    _call: &Call,
    real: real::graph_exec_update_v1,
    exec: CUgraphExec,
    graph: CUgraph,
    error_node: *mut CUgraphNode,
    result: *mut u32,
) -> CUresult {
    let status = unsafe { real(exec, graph, error_node, result) };
    if ok(status) {
        super::graph_footprint::forget(exec);
        model().exec_updated(exec as u64, graph as u64);
    }
    status
}

pub unsafe fn stream_begin_capture_to_graph(
    call: &Call,
    real: real::stream_begin_capture_to_graph,
    h_stream: CUstream,
    graph: CUgraph,
    deps: *const CUgraphNode,
    dep_data: *const GraphEdgeData,
    num_deps: usize,
    mode: u32,
) -> CUresult {
    let status = unsafe { real(h_stream, graph, deps, dep_data, num_deps, mode) };
    if ok(status) {
        super::load_gate::capture_began(h_stream.cast(), mode);
        let (deps, programmatic) = unsafe { (handles(deps, num_deps), programmatic(dep_data, num_deps)) };
        model().capture_begin_into(stream(call, h_stream), graph as u64, &deps, &programmatic);
    }
    status
}

/// The capture's next nodes follow `deps`, added to the current ones or in their place.
pub unsafe fn stream_update_capture_dependencies(
    call: &Call,
    real: real::stream_update_capture_dependencies,
    h_stream: CUstream,
    deps: *mut CUgraphNode,
    num_deps: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, deps, num_deps, flags) };
    if ok(status) {
        let deps = unsafe { handles(deps, num_deps) };
        model().capture_dependencies(stream(call, h_stream), &deps, &[], flags & SET_CAPTURE_DEPENDENCIES != 0);
    }
    status
}

pub unsafe fn stream_update_capture_dependencies_v2(
    call: &Call,
    real: real::stream_update_capture_dependencies_v2,
    h_stream: CUstream,
    deps: *mut CUgraphNode,
    dep_data: *const GraphEdgeData,
    num_deps: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, deps, dep_data, num_deps, flags) };
    if ok(status) {
        let (deps, programmatic) = unsafe { (handles(deps, num_deps), programmatic(dep_data, num_deps)) };
        let set = flags & SET_CAPTURE_DEPENDENCIES != 0;
        model().capture_dependencies(stream(call, h_stream), &deps, &programmatic, set);
    }
    status
}
