/* One scenario per rule of docs/semantics.md and per race kind, each with a racy and a fixed
   twin; the files of this folder follow the sections of docs/semantics.md.
   Usage: semantics SCENARIO racy|fixed   (semantics list: each scenario and the kinds its racy
   twin must be reported with, comma-separated; on a real driver, without the scenarios that
   only the stand-in can run)
   Driver API only, linked with -lcuda: it runs against the stand-in driver (which runs no
   kernel) and, unchanged, on a GPU (which runs empty ones).
   Exit status: 0 when the scenario ran, 4 when a driver call failed, 5 when copies did not
   move the bytes they name. */
#include "semantics.h"

/* Each scenario, and what its racy twin must be reported as ("clean": nothing). */
static const struct {
    const char *name;
    void (*run)(int fixed);
    const char *racy_twin_reports;
    int standin_only;
} SCENARIOS[] = {
    {"event_wait", event_wait, "cross-stream-race"},
    {"wait_unrecorded_event", wait_unrecorded_event, "cross-stream-race"},
    {"event_synchronize", event_synchronize, "cross-stream-race"},
    {"event_query", event_query, "cross-stream-race"},
    {"stream_synchronize", stream_synchronize, "cross-stream-race"},
    {"stream_query", stream_query, "cross-stream-race"},
    {"context_synchronize", context_synchronize, "cross-stream-race"},
    {"context_synchronize_v2", context_synchronize_v2, "cross-stream-race"},
    {"sync_free_is_device_wide", sync_free_is_device_wide, "free-race"},
    {"wait_value", wait_value, "cross-stream-race"},
    {"host_func", host_func, "cross-stream-race"},
    {"stream_callback", stream_callback, "cross-stream-race"},
    {"legacy_waits_for_blocking_streams", legacy_waits_for_blocking_streams, "cross-stream-race"},
    {"blocking_streams_wait_for_legacy", blocking_streams_wait_for_legacy, "cross-stream-race"},
    {"per_thread_default_streams", per_thread_default_streams, "cross-stream-race"},
    {"per_thread_entry_points", per_thread_entry_points, "cross-stream-race"},
    {"htod_from_pageable_memory", htod_from_pageable_memory, "cross-stream-race"},
    {"dtoh_joins_the_host", dtoh_joins_the_host, "cross-stream-race"},
    {"dtod_does_not_join_the_host", dtod_does_not_join_the_host, "cross-stream-race"},
    {"unified_copy_between_device_buffers", unified_copy_between_device_buffers, "cross-stream-race"},
    {"memset_of_device_memory", memset_of_device_memory, "cross-stream-race"},
    {"memset_of_no_bytes", memset_of_no_bytes, "cross-stream-race"},
    {"async_copy_does_not_join_the_host", async_copy_does_not_join_the_host, "cross-stream-race"},
    {"copy_of_no_bytes", copy_of_no_bytes, "cross-stream-race"},
    {"strided_copy_cover", strided_copy_cover, "cross-stream-race"},
    {"copy_3d_of_many_slices", copy_3d_of_many_slices, "cross-stream-race"},
    {"unified_2d_copy_to_pinned_memory", unified_2d_copy_to_pinned_memory, "cross-stream-race"},
    {"strided_copy", strided_copy, "cross-stream-race"},
    {"dtoh_async_to_pageable_memory", dtoh_async_to_pageable_memory, "cross-stream-race"},
    {"freed_host_range", freed_host_range, "free-race"},
    {"use_before_alloc", use_before_alloc, "use-before-alloc,cross-stream-race"},
    {"free_race", free_race, "free-race"},
    {"use_after_free", use_after_free, "use-after-free"},
    {"cross_stream_raw", cross_stream_raw, "cross-stream-race"},
    {"cross_stream_war", cross_stream_war, "cross-stream-race"},
    {"cross_stream_waw", cross_stream_waw, "cross-stream-race"},
    {"chunks_of_one_buffer", chunks_of_one_buffer, "cross-stream-race"},
    {"concurrent_reads", concurrent_reads, "cross-stream-race"},
    {"untyped_kernels", untyped_kernels, "cross-stream-race"},
    {"untyped_first_touch", untyped_first_touch, "cross-stream-race"},
    {"untyped_learned_output", untyped_learned_output, "cross-stream-race"},
    {"stale_parameter_words", stale_parameter_words, "cross-stream-race"},
    {"cupy_wait_event", cupy_wait_event, "cross-stream-race"},
    {"annotated_suballocation", annotated_suballocation, "free-race"},
    {"graph_branches", graph_branches, "cross-stream-race"},
    {"graph_launch_order", graph_launch_order, "cross-stream-race"},
    {"capture_waits_on_a_later_event", capture_waits_on_a_later_event, "cross-stream-race"},
    {"built_graph_kernels", built_graph_kernels, "cross-stream-race"},
    {"built_graph_memcpy_after_kernel", built_graph_memcpy_after_kernel, "cross-stream-race"},
    {"built_graph_child", built_graph_child, "cross-stream-race"},
    {"built_graph_event_record", built_graph_event_record, "cross-stream-race"},
    {"built_graph_event_wait", built_graph_event_wait, "cross-stream-race"},
    {"built_graph_memset", built_graph_memset, "cross-stream-race"},
    {"built_graph_memset_set_params", built_graph_memset_set_params, "cross-stream-race"},
    {"built_graph_memset_of_no_bytes", built_graph_memset_of_no_bytes, "cross-stream-race", 1},
    {"built_graph_memcpy_set_params", built_graph_memcpy_set_params, "cross-stream-race"},
    {"built_graph_exec_memcpy_set_params", built_graph_exec_memcpy_set_params, "cross-stream-race"},
    {"built_graph_kernel_set_params", built_graph_kernel_set_params, "cross-stream-race"},
    {"built_graph_exec_kernel_set_params", built_graph_exec_kernel_set_params, "cross-stream-race"},
    {"built_graph_exec_update", built_graph_exec_update, "cross-stream-race"},
    {"built_graph_exec_update_v1", built_graph_exec_update_v1, "cross-stream-race"},
    {"built_graph_destroy_node", built_graph_destroy_node, "cross-stream-race"},
    {"built_graph_clone", built_graph_clone, "cross-stream-race"},
    {"capture_to_graph", capture_to_graph, "cross-stream-race"},
    {"capture_update_dependencies", capture_update_dependencies, "cross-stream-race"},
    {"capture_update_dependencies_v2", capture_update_dependencies_v2, "cross-stream-race"},
    {"built_graph_mem_alloc", built_graph_mem_alloc, "use-before-alloc"},
    {"built_graph_mem_free", built_graph_mem_free, "free-race"},
    {"peer_copy_into_new_array", peer_copy_into_new_array, "use-before-alloc"},
    {"sync_free_and_another_device", sync_free_and_another_device, "free-race"},
    {"cross_device_event", cross_device_event, "cross-stream-race"},
    {"launch_kernel_ex", launch_kernel_ex, "cross-stream-race"},
    {"launch_programmatic_event", launch_programmatic_event, "cross-stream-race"},
    {"launch_completion_event", launch_completion_event, "cross-stream-race"},
    {"programmatic_stream_serialization", programmatic_stream_serialization, "cross-stream-race"},
    {"cooperative_launch", cooperative_launch, "cross-stream-race"},
    {"memcpy_batch", memcpy_batch, "cross-stream-race"},
    {"copy_3d", copy_3d, "cross-stream-race"},
    {"copy_3d_peer", copy_3d_peer, "cross-stream-race"},
    {"memset_widths", memset_widths, "cross-stream-race"},
    {"memset_2d_rows", memset_2d_rows, "cross-stream-race"},
    {"batch_mem_op", batch_mem_op, "cross-stream-race"},
    {"wait_value_64", wait_value_64, "cross-stream-race"},
    {"virtual_memory", virtual_memory, "cross-stream-race"},
    {"registered_host_memory", registered_host_memory, "cross-stream-race"},
    {"managed_memory", managed_memory, "cross-stream-race"},
    {"pitched_memory", pitched_memory, "cross-stream-race"},
    {"pool_allocation", pool_allocation, "use-before-alloc"},
    {"event_record_with_flags", event_record_with_flags, "cross-stream-race"},
    {"library_kernels", library_kernels, "cross-stream-race"},
    {"enumerated_library_kernels", enumerated_library_kernels, "cross-stream-race", 1},
    {"green_context_stream", green_context_stream, "cross-stream-race", 1},
    {"context_destroy", context_destroy, "cross-stream-race"},
    {"array_copies", array_copies, "cross-stream-race"},
    {"array_sides", array_sides, "cross-stream-race"},
    {"array_destroy_race", array_destroy_race, "free-race"},
    {"mipmap_destroy_race", mipmap_destroy_race, "free-race"},
    {"mipmap_levels", mipmap_levels, "cross-stream-race"},
    {"mipmap_3d_levels", mipmap_3d_levels, "cross-stream-race"},
    {"array_strided_copies", array_strided_copies, "cross-stream-race"},
    {"array_of_unknown_element_size", array_of_unknown_element_size, "cross-stream-race", 1},
    {"array_slices", array_slices, "cross-stream-race"},
    {"memcpy_3d_batch", memcpy_3d_batch, "cross-stream-race"},
    {"batch_3d_pointer_rows", batch_3d_pointer_rows, "cross-stream-race"},
    {"batch_3d_array_offset", batch_3d_array_offset, "cross-stream-race"},
    {"refused_wait", refused_wait, "cross-stream-race"},
    {"refused_instantiate", refused_instantiate, "cross-stream-race", 1},
    {"managed_memory_hints", managed_memory_hints, "cross-stream-race"},
    {"ipc_memory", ipc_memory, "cross-stream-race", 1},
    {"pool_import", pool_import, "cross-stream-race", 1},
    {"external_semaphore", external_semaphore, "cross-stream-race", 1},
    {"notes", notes, "clean"},
};

int main(int argc, char **argv) {
    size_t count = sizeof SCENARIOS / sizeof *SCENARIOS;
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        int standin = dlsym(RTLD_DEFAULT, "standinRunCallbacks") != NULL;
        for (size_t i = 0; i < count; i++)
            if (standin || !SCENARIOS[i].standin_only)
                printf("%s %s\n", SCENARIOS[i].name, SCENARIOS[i].racy_twin_reports);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "racy") && strcmp(argv[2], "fixed"))) {
        fprintf(stderr, "usage: semantics SCENARIO racy|fixed | semantics list\n");
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(argv[1], SCENARIOS[i].name) == 0) {
            setup();
            SCENARIOS[i].run(strcmp(argv[2], "fixed") == 0);
            CHECK(cuCtxSynchronize());
            printf("%s %s: done\n", argv[1], argv[2]);
            return 0;
        }
    }
    fprintf(stderr, "no scenario %s\n", argv[1]);
    return 2;
}
