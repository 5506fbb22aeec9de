//! Graphs: which executable graph comes from which captured graph, launches (their kernel
//! nodes measured in [`graph_footprint`]), destruction.

use core::ffi::c_char;

use streamsan_driver_api::*;

use super::call::{ok, stream};
use super::graph_footprint;
use super::model::model;
use crate::intercept::variants::{real, Call};

fn instantiated(status: CUresult, exec: *mut CUgraphExec, graph: CUgraph) {
    if ok(status) && !exec.is_null() {
        // SAFETY: the driver wrote the new executable graph's handle.
        let exec = unsafe { *exec };
        graph_footprint::instantiated(exec, graph);
        model().graph_instantiated(exec as u64, graph as u64);
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
    let on = stream(call, h_stream);
    let (status, measured) = graph_footprint::launch(exec, on, || unsafe { real(exec, h_stream) });
    if ok(status) {
        graph_footprint::launched(call, exec, on, &measured);
    }
    status
}

pub unsafe fn graph_exec_destroy(_call: &Call, real: real::graph_exec_destroy, exec: CUgraphExec) -> CUresult {
    let status = unsafe { real(exec) };
    if ok(status) {
        graph_footprint::forget(exec);
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
