//! What calls mean: the exported hooks, each calling its family's handler, which calls the
//! real driver function exactly once with the caller's arguments, returns its status
//! unchanged and tells the process's [`model`] what the call did. A family without a handler
//! in one of the topic modules keeps the plain forwarder generated in `forward`.
//!
//! Safety, for every handler: the arguments are the caller's, as it gave them to the
//! driver's entry point, and the handler reads through them only what the driver's
//! documentation says the driver reads, after the driver accepted the call.

use streamsan_driver_api::*;

use crate::intercept::exports::export_hooks;
use crate::intercept::variants::{real, Call};

mod forward {
    use super::*;

    macro_rules! define_forwarders {
        ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
            $(
                #[allow(dead_code)]
                #[inline]
                pub unsafe fn $family(_call: &Call, real: real::$family, $($arg: $ty),*) -> CUresult {
                    // SAFETY: the caller's own arguments, passed on unchanged.
                    unsafe { real($($arg),*) }
                }
            )*
        };
    }
    driver_api!(define_forwarders);
}

pub mod annotate;
mod arrays;
pub mod batch;
mod call;
mod code;
mod contexts;
mod copies;
mod entry_points;
mod events;
pub mod footprint;
mod graph_footprint;
mod graph_nodes;
mod graphs;
mod host_reach;
mod ipc;
pub mod kernels;
mod launches;
mod load_gate;
mod memory;
mod memsets;
pub mod model;
mod nccl;
pub mod peers;
mod programmatic;
mod streams;

pub use arrays::{
    array_3d_create, array_create, array_destroy, mipmapped_array_create, mipmapped_array_destroy,
    mipmapped_array_get_level,
};
pub use code::{
    kernel_get_function, library_get_kernel, library_load_data, library_unload, module_get_function, module_load_data,
    module_load_data_ex, module_unload,
};
pub use contexts::{ctx_destroy, ctx_synchronize, ctx_synchronize_v2, primary_ctx_reset, primary_ctx_retain};
pub use copies::{
    memcpy, memcpy_2d, memcpy_2d_async, memcpy_3d, memcpy_3d_async, memcpy_3d_batch_async, memcpy_3d_batch_async_v2,
    memcpy_3d_peer, memcpy_3d_peer_async, memcpy_async, memcpy_atoa, memcpy_atod, memcpy_atoh, memcpy_atoh_async,
    memcpy_batch_async, memcpy_batch_async_v2, memcpy_dtoa, memcpy_dtod, memcpy_dtod_async, memcpy_dtoh,
    memcpy_dtoh_async, memcpy_htoa, memcpy_htoa_async, memcpy_htod, memcpy_htod_async, memcpy_peer, memcpy_peer_async,
};
pub use entry_points::{get_proc_address, get_proc_address_v2};
pub use events::{event_destroy, event_query, event_record, event_record_with_flags, event_synchronize};
#[allow(unused_imports)]
pub use forward::*;
pub use graph_nodes::{
    graph_add_batch_mem_op_node, graph_add_child_graph_node, graph_add_dependencies, graph_add_dependencies_v2,
    graph_add_empty_node, graph_add_event_record_node, graph_add_event_wait_node, graph_add_host_node,
    graph_add_kernel_node, graph_add_mem_alloc_node, graph_add_mem_free_node, graph_add_memcpy_node,
    graph_add_memset_node, graph_add_node, graph_add_node_v2, graph_clone, graph_create, graph_destroy_node,
    graph_exec_kernel_node_set_params, graph_exec_memcpy_node_set_params, graph_exec_memset_node_set_params,
    graph_exec_update, graph_exec_update_v1, graph_kernel_node_set_params, graph_memcpy_node_set_params,
    graph_memset_node_set_params, graph_remove_dependencies, graph_remove_dependencies_v2,
    stream_begin_capture_to_graph, stream_update_capture_dependencies, stream_update_capture_dependencies_v2,
};
pub use graphs::{
    graph_destroy, graph_exec_destroy, graph_instantiate, graph_instantiate_with_flags, graph_instantiate_with_params,
    graph_launch,
};
pub use ipc::{
    ipc_close_mem_handle, ipc_get_event_handle, ipc_get_mem_handle, ipc_open_event_handle, ipc_open_mem_handle,
    mem_pool_export_pointer, mem_pool_import_pointer,
};
pub use launches::{launch_cooperative_kernel, launch_host_func, launch_kernel, launch_kernel_ex, stream_add_callback};
pub use memory::{
    mem_alloc, mem_alloc_async, mem_alloc_from_pool_async, mem_alloc_host, mem_alloc_managed, mem_alloc_pitch,
    mem_free, mem_free_async, mem_free_host, mem_host_alloc, mem_host_register, mem_host_unregister, mem_map,
    mem_unmap,
};
pub use memsets::{
    memset_d16, memset_d16_async, memset_d2d16, memset_d2d16_async, memset_d2d32, memset_d2d32_async, memset_d2d8,
    memset_d2d8_async, memset_d32, memset_d32_async, memset_d8, memset_d8_async,
};
pub use streams::{
    signal_external_semaphores, stream_batch_mem_op, stream_begin_capture, stream_begin_capture_v1, stream_create,
    stream_create_with_priority, stream_destroy, stream_end_capture, stream_query, stream_set_attribute,
    stream_synchronize, stream_wait_event, stream_wait_value_32, stream_wait_value_64, stream_write_value_32,
    stream_write_value_64, wait_external_semaphores,
};

pub use crate::host_races::{after_call, before_call};

driver_api!(export_hooks);
