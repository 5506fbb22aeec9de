//! Graphs built with the explicit graph API: nodes, edges, parameters, updates, and
//! captures into an existing graph (`docs/semantics.md#capture-and-graphs`).
//!
//! Each node gets the meaning the same operation has on a stream: a kernel node's accesses
//! come from its parameters as a launch's do ([`super::kernels`], read when the node is
//! added, as the driver copies them then), a memcpy node's from its 3D descriptor, a memset
//! node's from its rows. A node added through a call that does not say what it touches
//! (`cuGraphAddNode`, batch memory operations) makes the graph one the model does not
//! follow. A host node orders the stream's work only (the host does not learn when it ran).
//! `cuGraphUpload` runs nothing: it keeps its forwarder.

use core::ffi::c_uint;

use streamsan::model::definition::AddedNode;
use streamsan::model::definition::NodeKind;
use streamsan::model::op::KernelId;
use streamsan_driver_api::*;

use super::call::{ok, origin, stream};
use super::copies::copy_3d_accesses;
use super::kernels;
use super::memsets::push_set_accesses;
use super::model::model;
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// `CU_STREAM_SET_CAPTURE_DEPENDENCIES`.
const SET_CAPTURE_DEPENDENCIES: c_uint = 0x1;

/// `n` node handles from the caller's array.
unsafe fn handles(nodes: *const CUgraphNode, n: usize) -> Vec<u64> {
    if nodes.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's array of `n` nodes, which the driver accepted.
    (0..n).map(|i| unsafe { *nodes.add(i) } as u64).collect()
}

/// A node the driver added: tells the model, with what it does.
unsafe fn added(
    call: &Call,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    what: (NodeKind, Option<KernelId>),
    child: Option<CUgraph>,
) {
    // SAFETY: the driver wrote the new node's handle.
    let Some(&handle) = (unsafe { node.as_ref() }) else {
        return;
    };
    let deps = unsafe { handles(deps, num_deps) };
    let (kind, kernel) = what;
    let node =
        AddedNode { graph: graph as u64, handle: handle as u64, deps: &deps, kind, origin: origin(call), kernel };
    model().graph_node_added(node, child.map(|c| c as u64));
}

/// What a kernel node does: the accesses of its parameters. The `_v2` parameters may name
/// the kernel by `kern` alone.
unsafe fn kernel_node(call: &Call, params: *const KernelNodeParams) -> Option<(NodeKind, Option<KernelId>)> {
    // SAFETY: the parameters the driver accepted.
    let p = unsafe { params.as_ref()? };
    let f = if p.func.is_null() && call.name().contains("_v2") { p.kern } else { p.func };
    let model = model();
    let info = kernels::info(model, f);
    let mut accesses = Vec::new();
    unsafe { kernels::accesses(model, &info, p.kernel_params, p.extra, &mut accesses) };
    Some((NodeKind::Work { accesses }, info.id))
}

unsafe fn memcpy_node(copy: *const Memcpy3D) -> Option<(NodeKind, Option<KernelId>)> {
    // SAFETY: the descriptor the driver accepted.
    let copy = unsafe { copy.as_ref()? };
    Some((NodeKind::Work { accesses: copy_3d_accesses(copy) }, None))
}

unsafe fn memset_node(params: *const MemsetNodeParams) -> Option<(NodeKind, Option<KernelId>)> {
    // SAFETY: the parameters the driver accepted.
    let p = unsafe { params.as_ref()? };
    let mut accesses = Vec::new();
    push_set_accesses(&mut accesses, p.dst, p.pitch, p.width * p.element_size as usize, p.height);
    Some((NodeKind::Work { accesses }, None))
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

pub unsafe fn graph_add_kernel_node(
    call: &Call,
    real: real::graph_add_kernel_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const KernelNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    if ok(status) {
        if let Some(what) = unsafe { kernel_node(call, params) } {
            unsafe { added(call, node, graph, deps, num_deps, what, None) };
        }
    }
    status
}

pub unsafe fn graph_add_memcpy_node(
    call: &Call,
    real: real::graph_add_memcpy_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    copy: *const Memcpy3D,
    ctx: CUcontext,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, copy, ctx) };
    if ok(status) {
        if let Some(what) = unsafe { memcpy_node(copy) } {
            unsafe { added(call, node, graph, deps, num_deps, what, None) };
        }
    }
    status
}

pub unsafe fn graph_add_memset_node(
    call: &Call,
    real: real::graph_add_memset_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const MemsetNodeParams,
    ctx: CUcontext,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params, ctx) };
    if ok(status) {
        if let Some(what) = unsafe { memset_node(params) } {
            unsafe { added(call, node, graph, deps, num_deps, what, None) };
        }
    }
    status
}

pub unsafe fn graph_add_host_node(
    call: &Call,
    real: real::graph_add_host_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const CUDA_HOST_NODE_PARAMS,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    if ok(status) {
        unsafe { added(call, node, graph, deps, num_deps, (NodeKind::Empty, None), None) };
    }
    status
}

pub unsafe fn graph_add_empty_node(
    call: &Call,
    real: real::graph_add_empty_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps) };
    if ok(status) {
        unsafe { added(call, node, graph, deps, num_deps, (NodeKind::Empty, None), None) };
    }
    status
}

pub unsafe fn graph_add_child_graph_node(
    call: &Call,
    real: real::graph_add_child_graph_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    child: CUgraph,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, child) };
    if ok(status) {
        unsafe { added(call, node, graph, deps, num_deps, (NodeKind::Empty, None), Some(child)) };
    }
    status
}

pub unsafe fn graph_add_event_record_node(
    call: &Call,
    real: real::graph_add_event_record_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    event: CUevent,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, event) };
    if ok(status) {
        unsafe {
            added(call, node, graph, deps, num_deps, (NodeKind::RecordEvent { event: event as u64 }, None), None)
        };
    }
    status
}

pub unsafe fn graph_add_event_wait_node(
    call: &Call,
    real: real::graph_add_event_wait_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    event: CUevent,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, event) };
    if ok(status) {
        unsafe { added(call, node, graph, deps, num_deps, (NodeKind::WaitEvent { event: event as u64 }, None), None) };
    }
    status
}

/// The driver chooses the address (in `params.dptr`) when the node is added; the memory is
/// the graph's from then on, allocated by the node at each launch.
pub unsafe fn graph_add_mem_alloc_node(
    call: &Call,
    real: real::graph_add_mem_alloc_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *mut MemAllocNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    // SAFETY: the parameters the driver filled in.
    if let (true, Some(p)) = (ok(status), unsafe { params.as_ref() }) {
        let kind = NodeKind::Alloc { base: p.dptr, size: p.bytesize as u64, ctx: driver::current_context() };
        unsafe { added(call, node, graph, deps, num_deps, (kind, None), None) };
    }
    status
}

pub unsafe fn graph_add_mem_free_node(
    call: &Call,
    real: real::graph_add_mem_free_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    dptr: CUdeviceptr,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, dptr) };
    if ok(status) {
        unsafe { added(call, node, graph, deps, num_deps, (NodeKind::Free { base: dptr }, None), None) };
    }
    status
}

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
    _call: &Call,
    real: real::graph_add_node,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, num_deps, params) };
    if ok(status) {
        model().graph_opaque_node_added(graph as u64);
    }
    status
}

pub unsafe fn graph_add_node_v2(
    _call: &Call,
    real: real::graph_add_node_v2,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    edge_data: *const CUgraphEdgeData,
    num_deps: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    let status = unsafe { real(node, graph, deps, edge_data, num_deps, params) };
    if ok(status) {
        model().graph_opaque_node_added(graph as u64);
    }
    status
}

unsafe fn edges(graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, num: usize, add: bool) {
    let (from, to) = unsafe { (handles(from, num), handles(to, num)) };
    model().graph_edges(graph as u64, &from, &to, add);
}

pub unsafe fn graph_add_dependencies(
    _call: &Call,
    real: real::graph_add_dependencies,
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    num: usize,
) -> CUresult {
    let status = unsafe { real(graph, from, to, num) };
    if ok(status) {
        unsafe { edges(graph, from, to, num, true) };
    }
    status
}

pub unsafe fn graph_add_dependencies_v2(
    _call: &Call,
    real: real::graph_add_dependencies_v2,
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    edge_data: *const CUgraphEdgeData,
    num: usize,
) -> CUresult {
    let status = unsafe { real(graph, from, to, edge_data, num) };
    if ok(status) {
        unsafe { edges(graph, from, to, num, true) };
    }
    status
}

pub unsafe fn graph_remove_dependencies(
    _call: &Call,
    real: real::graph_remove_dependencies,
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    num: usize,
) -> CUresult {
    let status = unsafe { real(graph, from, to, num) };
    if ok(status) {
        unsafe { edges(graph, from, to, num, false) };
    }
    status
}

pub unsafe fn graph_remove_dependencies_v2(
    _call: &Call,
    real: real::graph_remove_dependencies_v2,
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    edge_data: *const CUgraphEdgeData,
    num: usize,
) -> CUresult {
    let status = unsafe { real(graph, from, to, edge_data, num) };
    if ok(status) {
        unsafe { edges(graph, from, to, num, false) };
    }
    status
}

pub unsafe fn graph_destroy_node(_call: &Call, real: real::graph_destroy_node, node: CUgraphNode) -> CUresult {
    let status = unsafe { real(node) };
    if ok(status) {
        model().graph_node_destroyed(node as u64);
    }
    status
}

pub unsafe fn graph_kernel_node_set_params(
    call: &Call,
    real: real::graph_kernel_node_set_params,
    node: CUgraphNode,
    params: *const KernelNodeParams,
) -> CUresult {
    let status = unsafe { real(node, params) };
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { kernel_node(call, params) }) {
        model().graph_node_params(node as u64, kind, kernel);
    }
    status
}

pub unsafe fn graph_memcpy_node_set_params(
    _call: &Call,
    real: real::graph_memcpy_node_set_params,
    node: CUgraphNode,
    copy: *const Memcpy3D,
) -> CUresult {
    let status = unsafe { real(node, copy) };
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { memcpy_node(copy) }) {
        model().graph_node_params(node as u64, kind, kernel);
    }
    status
}

pub unsafe fn graph_memset_node_set_params(
    _call: &Call,
    real: real::graph_memset_node_set_params,
    node: CUgraphNode,
    params: *const MemsetNodeParams,
) -> CUresult {
    let status = unsafe { real(node, params) };
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { memset_node(params) }) {
        model().graph_node_params(node as u64, kind, kernel);
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
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { kernel_node(call, params) }) {
        model().exec_node_params(exec as u64, node as u64, kind, kernel);
    }
    status
}

pub unsafe fn graph_exec_memcpy_node_set_params(
    _call: &Call,
    real: real::graph_exec_memcpy_node_set_params,
    exec: CUgraphExec,
    node: CUgraphNode,
    copy: *const Memcpy3D,
    ctx: CUcontext,
) -> CUresult {
    let status = unsafe { real(exec, node, copy, ctx) };
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { memcpy_node(copy) }) {
        model().exec_node_params(exec as u64, node as u64, kind, kernel);
    }
    status
}

pub unsafe fn graph_exec_memset_node_set_params(
    _call: &Call,
    real: real::graph_exec_memset_node_set_params,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const MemsetNodeParams,
    ctx: CUcontext,
) -> CUresult {
    let status = unsafe { real(exec, node, params, ctx) };
    if let (true, Some((kind, kernel))) = (ok(status), unsafe { memset_node(params) }) {
        model().exec_node_params(exec as u64, node as u64, kind, kernel);
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
    dep_data: *const CUgraphEdgeData,
    num_deps: usize,
    mode: u32,
) -> CUresult {
    let status = unsafe { real(h_stream, graph, deps, dep_data, num_deps, mode) };
    if ok(status) {
        let deps = unsafe { handles(deps, num_deps) };
        model().capture_begin_into(stream(call, h_stream), graph as u64, &deps);
    }
    status
}

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
        model().capture_dependencies(stream(call, h_stream), &deps, flags & SET_CAPTURE_DEPENDENCIES != 0);
    }
    status
}

pub unsafe fn stream_update_capture_dependencies_v2(
    call: &Call,
    real: real::stream_update_capture_dependencies_v2,
    h_stream: CUstream,
    deps: *mut CUgraphNode,
    dep_data: *const CUgraphEdgeData,
    num_deps: usize,
    flags: c_uint,
) -> CUresult {
    let status = unsafe { real(h_stream, deps, dep_data, num_deps, flags) };
    if ok(status) {
        let deps = unsafe { handles(deps, num_deps) };
        model().capture_dependencies(stream(call, h_stream), &deps, flags & SET_CAPTURE_DEPENDENCIES != 0);
    }
    status
}
