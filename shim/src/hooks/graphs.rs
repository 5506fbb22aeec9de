//! Graphs: which executable graph comes from which captured graph, launches, destruction.

use core::ffi::c_char;

use streamsan_driver_api::*;

use super::call::{ok, origin, stream};
use super::model::model;
use crate::intercept::variants::{real, Call};

fn instantiated(status: CUresult, exec: *mut CUgraphExec, graph: CUgraph) {
    if ok(status) && !exec.is_null() {
        model().graph_instantiated(unsafe { *exec } as u64, graph as u64);
    }
}

pub unsafe fn graph_instantiate(
    _call: &Call,
    real: real::graph_instantiate,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    error_node: *mut CUgraphNode,
    log_buffer: *mut c_char,
    buffer_size: usize,
) -> CUresult {
    let status = unsafe { real(exec, graph, error_node, log_buffer, buffer_size) };
    instantiated(status, exec, graph);
    status
}

pub unsafe fn graph_instantiate_with_flags(
    _call: &Call,
    real: real::graph_instantiate_with_flags,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    flags: u64,
) -> CUresult {
    let status = unsafe { real(exec, graph, flags) };
    instantiated(status, exec, graph);
    status
}

pub unsafe fn graph_instantiate_with_params(
    _call: &Call,
    real: real::graph_instantiate_with_params,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS,
) -> CUresult {
    let status = unsafe { real(exec, graph, params) };
    instantiated(status, exec, graph);
    status
}

pub unsafe fn graph_launch(call: &Call, real: real::graph_launch, exec: CUgraphExec, h_stream: CUstream) -> CUresult {
    let status = unsafe { real(exec, h_stream) };
    if ok(status) {
        model().graph_launch(exec as u64, stream(call, h_stream), &origin(call));
    }
    status
}

pub unsafe fn graph_exec_destroy(_call: &Call, real: real::graph_exec_destroy, exec: CUgraphExec) -> CUresult {
    let status = unsafe { real(exec) };
    if ok(status) {
        model().exec_destroyed(exec as u64);
    }
    status
}

pub unsafe fn graph_destroy(_call: &Call, real: real::graph_destroy, graph: CUgraph) -> CUresult {
    let status = unsafe { real(graph) };
    if ok(status) {
        model().graph_destroyed(graph as u64);
    }
    status
}
