//! One named test per rule of `docs/semantics.md` and per race kind: a racy program and its fixed
//! twin (`tests/scenarios/semantics/`), run through the shim against the stand-in driver.
//! The racy twin must be reported with exactly its kinds, the fixed twin must be clean, and both
//! must behave as they do without streamsan.

use std::collections::BTreeSet;

use crate::common::*;

fn run_twin(scenario: &str, twin: &str) -> Run {
    let env = vec![("STANDIN_DEFER_CALLBACKS", "1".to_string())];
    let run = run_with(&semantics(), &[scenario, twin], RunOptions { env: env.clone(), ..Default::default() });
    run.assert_ran();
    run.assert_reports_match_the_schema();
    let native = run_with(&semantics(), &[scenario, twin], RunOptions { env, native: true });
    assert_eq!(native.stdout(), run.stdout(), "{scenario} {twin}: output changed");
    run
}

/// What the scenario program's own table says its racy twin reports: kinds, comma-separated.
fn listed_kinds(scenario: &str) -> String {
    let listed = run_with(&semantics(), &["list"], RunOptions { native: true, ..Default::default() }).stdout();
    let line = listed.lines().find(|l| l.split(' ').next() == Some(scenario)).expect("listed scenario");
    line.split(' ').nth(1).unwrap().to_string()
}

/// The kinds a report holds, sorted, without repeats.
fn kinds_of(report: &streamsan::report::Report) -> Vec<&'static str> {
    let kinds: BTreeSet<&'static str> = report.races.iter().map(|r| r.kind.as_str()).collect();
    kinds.into_iter().collect()
}

/// Runs both twins: the racy one must report exactly the kinds `kinds` (comma-separated; each
/// cross-stream race with `hazard`, when given), the fixed one nothing. Returns the racy
/// twin's report.
fn check(scenario: &str, kinds: &str, hazard: Option<&str>) -> streamsan::report::Report {
    assert_eq!(listed_kinds(scenario), kinds, "the program's table disagrees for {scenario}");
    let mut expected: Vec<&str> = kinds.split(',').collect();
    expected.sort_unstable();
    let racy = run_twin(scenario, "racy").report();
    assert_eq!(
        kinds_of(&racy),
        expected,
        "{scenario} racy: got {:?}",
        racy.races.iter().map(|r| (&r.kind, &r.hazard, &r.second.api)).collect::<Vec<_>>()
    );
    if let Some(hazard) = hazard {
        let hazards: Vec<_> = racy.races_of(CROSS).map(|r| r.hazard.map(|h| h.as_str())).collect();
        assert!(hazards.iter().all(|h| *h == Some(hazard)), "{scenario} racy: expected {hazard}, got {hazards:?}");
    }
    let fixed = run_twin(scenario, "fixed").report();
    assert!(
        fixed.races.is_empty(),
        "{scenario} fixed: expected no race, got {:?}",
        fixed.races.iter().map(|r| (&r.kind, &r.hazard, streamsan::report::text::missing_wait(r))).collect::<Vec<_>>()
    );
    racy
}

/// The entry points whose operations came second in the racy twin's races, sorted.
fn second_apis(report: &streamsan::report::Report) -> Vec<String> {
    let apis: BTreeSet<String> = report.races.iter().map(|r| r.second.api.clone()).collect();
    apis.into_iter().collect()
}

const CROSS: &str = "cross-stream-race";

#[test]
fn event_record_and_wait_order_two_streams() {
    check("event_wait", CROSS, Some("RAW"));
}

/// Each racing stream is named with where the program created it (`cuStreamCreate`).
#[test]
fn a_race_names_where_each_stream_was_created() {
    let report = run_twin("event_wait", "racy").report();
    let race = report.races.first().expect("a race");
    for side in [&race.first, &race.second] {
        let created = streamsan::report::text::describe_site(&side.stream.created_at);
        assert!(
            created.contains("semantics/common.c") && created.ends_with("in stream"),
            "{}: created at {created}",
            side.stream.label
        );
    }
}

#[test]
fn a_wait_on_a_never_recorded_event_orders_nothing_and_is_noted() {
    check("wait_unrecorded_event", CROSS, Some("RAW"));
    let racy = run_twin("wait_unrecorded_event", "racy").report();
    assert!(racy.notes.iter().any(|n| n.kind == "wait-on-unrecorded-event"), "{:?}", racy.notes);
}

#[test]
fn event_synchronize_orders_the_host() {
    check("event_synchronize", CROSS, Some("RAW"));
}

#[test]
fn a_successful_event_query_orders_the_host() {
    check("event_query", CROSS, Some("RAW"));
}

#[test]
fn stream_synchronize_orders_the_host() {
    check("stream_synchronize", CROSS, Some("RAW"));
}

#[test]
fn a_successful_stream_query_orders_the_host() {
    check("stream_query", CROSS, Some("RAW"));
}

#[test]
fn context_synchronize_orders_the_host() {
    check("context_synchronize", CROSS, Some("RAW"));
    let racy = check("context_synchronize_v2", CROSS, Some("RAW"));
    assert_eq!(racy.races.len(), 2, "x and y, each ordered by one form of the call");
}

#[test]
fn a_synchronous_free_waits_for_the_whole_device() {
    check("sync_free_is_device_wide", "free-race", None);
}

#[test]
fn stream_wait_value_orders_after_the_write() {
    check("wait_value", CROSS, Some("RAW"));
}

#[test]
fn a_host_function_that_ran_orders_the_host() {
    check("host_func", CROSS, Some("RAW"));
}

#[test]
fn a_stream_callback_that_ran_orders_the_host() {
    check("stream_callback", CROSS, Some("RAW"));
}

#[test]
fn the_legacy_stream_waits_for_blocking_streams_only() {
    check("legacy_waits_for_blocking_streams", CROSS, Some("RAW"));
}

#[test]
fn blocking_streams_wait_for_the_legacy_stream() {
    check("blocking_streams_wait_for_legacy", CROSS, Some("RAW"));
}

#[test]
fn per_thread_default_streams_of_two_threads_are_not_ordered() {
    check("per_thread_default_streams", CROSS, Some("RAW"));
}

#[test]
fn handle_0_at_a_per_thread_entry_point_is_the_thread_s_per_thread_stream() {
    check("per_thread_entry_points", CROSS, Some("RAW"));
}

#[test]
fn a_copy_from_pageable_memory_does_not_wait_for_its_own_completion() {
    check("htod_from_pageable_memory", CROSS, Some("RAW"));
}

#[test]
fn a_synchronous_copy_to_the_host_orders_the_host() {
    check("dtoh_joins_the_host", CROSS, Some("WAR"));
}

#[test]
fn a_synchronous_device_to_device_copy_does_not_order_the_host() {
    check("dtod_does_not_join_the_host", CROSS, Some("RAW"));
}

#[test]
fn a_synchronous_unified_copy_between_device_buffers_does_not_order_the_host() {
    check("unified_copy_between_device_buffers", CROSS, Some("RAW"));
}

#[test]
fn a_synchronous_memset_orders_the_host_only_for_host_memory() {
    check("memset_of_device_memory", CROSS, Some("RAW"));
}

#[test]
fn a_memset_of_no_bytes_does_not_order_the_host() {
    check("memset_of_no_bytes", CROSS, Some("RAW"));
}

#[test]
fn an_asynchronous_copy_does_not_order_the_host() {
    check("async_copy_does_not_join_the_host", CROSS, Some("RAW"));
}

#[test]
fn a_copy_of_no_bytes_touches_nothing() {
    check("copy_of_no_bytes", CROSS, Some("RAW"));
}

#[test]
fn a_2d_copy_s_unified_side_is_the_memory_its_address_is() {
    check("unified_2d_copy_to_pinned_memory", CROSS, Some("WAR"));
}

#[test]
fn past_32_rows_a_2d_copy_touches_the_cover_of_its_rows_and_no_more() {
    check("strided_copy_cover", CROSS, Some("RAW"));
}

#[test]
fn a_3d_copy_of_many_slices_touches_the_row_of_each() {
    check("copy_3d_of_many_slices", CROSS, Some("RAW"));
}

#[test]
fn a_2d_copy_reads_the_rows_it_names() {
    check("strided_copy", CROSS, Some("RAW"));
}

#[test]
fn an_asynchronous_copy_to_pageable_memory_completes_before_it_returns() {
    let racy = check("dtoh_async_to_pageable_memory", CROSS, Some("WAR"));
    assert_eq!(second_apis(&racy), ["cuLaunchKernel", "cuMemcpyHtoAAsync_v2"], "the array's copy too");
}

#[test]
fn with_pageable_copies_async_the_host_does_not_wait_for_them() {
    // The fixed twin copies to pageable memory: under the strict reading it races as the
    // racy twin's pinned copies do.
    let options = vec![("STREAMSAN_OPTIONS", "pageable_copies=async".to_string())];
    let racy = run_twin("dtoh_async_to_pageable_memory", "racy").report();
    let run = run_with(
        &semantics(),
        &["dtoh_async_to_pageable_memory", "fixed"],
        RunOptions { env: options, ..Default::default() },
    );
    run.assert_ran();
    assert_eq!(second_apis(&run.report()), second_apis(&racy));
}

#[test]
fn a_freed_host_range_is_ordinary_memory_again() {
    check("freed_host_range", "free-race", None);
}

#[test]
fn use_before_alloc() {
    // The memset on s1 and the kernel on s2 also write the same bytes unordered.
    check("use_before_alloc", "use-before-alloc,cross-stream-race", Some("WAW"));
}

#[test]
fn free_race() {
    check("free_race", "free-race", None);
}

#[test]
fn use_after_free() {
    check("use_after_free", "use-after-free", None);
}

#[test]
fn cross_stream_read_after_write() {
    check("cross_stream_raw", CROSS, Some("RAW"));
}

#[test]
fn cross_stream_write_after_read() {
    check("cross_stream_war", CROSS, Some("WAR"));
}

#[test]
fn cross_stream_write_after_write() {
    check("cross_stream_waw", CROSS, Some("WAW"));
}

#[test]
fn kernels_on_different_chunks_of_one_buffer_do_not_conflict() {
    check("chunks_of_one_buffer", CROSS, Some("WAW"));
}

#[test]
fn reads_through_pointers_to_const_do_not_conflict() {
    check("concurrent_reads", CROSS, Some("WAR"));
}

#[test]
fn kernels_of_unknown_signature_conflict_with_writes_only() {
    check("untyped_kernels", CROSS, Some("RAW"));
}

#[test]
fn the_first_kernel_of_unknown_signature_on_fresh_memory_writes_it() {
    check("untyped_first_touch", CROSS, None);
}

#[test]
fn a_kernel_parameter_once_given_fresh_memory_writes() {
    check("untyped_learned_output", CROSS, Some("RAW"));
}

#[test]
fn a_stale_address_in_a_by_value_structure_is_no_access() {
    check("stale_parameter_words", CROSS, Some("RAW"));
}

#[test]
fn cupy_wait_event_example() {
    check("cupy_wait_event", CROSS, Some("RAW"));
}

#[test]
fn an_annotated_sub_allocation_is_checked_like_a_driver_allocation() {
    check("annotated_suballocation", "free-race", None);
    let racy = run_twin("annotated_suballocation", "racy").report();
    let race = racy.races_of("free-race").next().unwrap();
    assert_eq!(race.buffer.kind, "annotated");
    assert_eq!(race.second.api, "streamsan_annotate_free");
}

#[test]
fn graph_nodes_without_a_path_between_them_are_concurrent() {
    let racy = check("graph_branches", CROSS, Some("WAW"));
    // Each node is named by its graph and the stream its graph was launched on.
    let label = &racy.races[0].second.stream.label;
    assert!(label.starts_with("a node of graph 0x") && label.contains(" launched on stream 0x"), "{label}");
}

#[test]
fn a_captured_wait_on_an_event_recorded_later_orders_each_launch() {
    check("capture_waits_on_a_later_event", CROSS, Some("RAW"));
    let fixed = run_twin("capture_waits_on_a_later_event", "fixed").report();
    assert!(no_notes_but_footprints(&fixed), "a captured wait is no wait on an unrecorded event: {:?}", fixed.notes);
}

#[test]
fn work_after_a_graph_launch_waits_for_it() {
    check("graph_launch_order", CROSS, Some("RAW"));
}

#[test]
fn built_graph_nodes_without_an_edge_between_them_are_concurrent() {
    check("built_graph_kernels", CROSS, Some("WAW"));
}

#[test]
fn a_built_graph_s_memcpy_node_follows_the_kernel_node_it_depends_on() {
    check("built_graph_memcpy_after_kernel", CROSS, Some("RAW"));
}

#[test]
fn a_child_graph_runs_after_the_nodes_its_node_depends_on() {
    check("built_graph_child", CROSS, Some("WAW"));
}

#[test]
fn an_event_record_node_records_what_it_follows() {
    check("built_graph_event_record", CROSS, Some("RAW"));
}

#[test]
fn an_event_wait_node_orders_the_nodes_after_it() {
    check("built_graph_event_wait", CROSS, Some("RAW"));
}

#[test]
fn a_built_graph_s_memset_node_writes_its_rows() {
    check("built_graph_memset", CROSS, Some("WAW"));
}

#[test]
fn a_memset_node_of_no_bytes_writes_nothing() {
    check("built_graph_memset_of_no_bytes", CROSS, Some("WAW"));
}

#[test]
fn a_memset_node_s_new_parameters_replace_its_accesses() {
    check("built_graph_memset_set_params", CROSS, Some("WAW"));
}

/// The memcpy node (named by the call that added it) reads, once re-pointed, what the kernel
/// node after it writes.
fn memcpy_node_set_params(scenario: &str) {
    let racy = check(scenario, CROSS, Some("WAR"));
    let race = &racy.races[0];
    assert_eq!(
        (race.first.api.as_str(), race.second.api.as_str()),
        ("cuGraphAddMemcpyNode", "cuGraphAddKernelNode_v2")
    );
}

#[test]
fn a_memcpy_node_s_new_parameters_replace_its_accesses() {
    memcpy_node_set_params("built_graph_memcpy_set_params");
}

#[test]
fn an_executable_graph_s_memcpy_node_parameters_replace_its_accesses() {
    memcpy_node_set_params("built_graph_exec_memcpy_set_params");
}

#[test]
fn a_kernel_node_s_new_parameters_replace_its_accesses() {
    check("built_graph_kernel_set_params", CROSS, Some("WAW"));
}

#[test]
fn an_executable_graph_s_kernel_node_parameters_replace_its_accesses() {
    check("built_graph_exec_kernel_set_params", CROSS, Some("WAW"));
}

#[test]
fn an_updated_executable_graph_runs_the_graph_it_was_updated_from() {
    check("built_graph_exec_update", CROSS, Some("WAW"));
}

#[test]
fn the_first_version_of_exec_update_replaces_the_graph_too() {
    check("built_graph_exec_update_v1", CROSS, Some("WAW"));
}

#[test]
fn a_destroyed_node_takes_its_edges_and_accesses_with_it() {
    check("built_graph_destroy_node", CROSS, Some("WAW"));
}

#[test]
fn a_cloned_graph_keeps_the_original_s_nodes() {
    check("built_graph_clone", CROSS, Some("WAW"));
}

#[test]
fn a_capture_into_a_graph_follows_the_nodes_it_starts_from() {
    check("capture_to_graph", CROSS, Some("WAW"));
}

#[test]
fn updated_capture_dependencies_order_the_next_captured_work() {
    check("capture_update_dependencies", CROSS, Some("WAW"));
}

#[test]
fn the_second_version_of_update_capture_dependencies_orders_too() {
    check("capture_update_dependencies_v2", CROSS, Some("WAW"));
}

#[test]
fn a_mem_alloc_node_s_memory_is_usable_only_after_it() {
    check("built_graph_mem_alloc", "use-before-alloc", None);
}

#[test]
fn a_mem_free_node_must_follow_the_nodes_using_the_memory() {
    check("built_graph_mem_free", "free-race", None);
}

#[test]
fn a_peer_copy_into_a_fresh_array_waits_for_its_allocation() {
    check("peer_copy_into_new_array", "use-before-alloc", None);
}

#[test]
fn a_synchronous_free_does_not_wait_for_other_devices() {
    check("sync_free_and_another_device", "free-race", None);
    let racy = run_twin("sync_free_and_another_device", "racy").report();
    assert_eq!(racy.races[0].missing_wait.action, "host-waits", "{:?}", racy.races[0].missing_wait);
}

#[test]
fn an_event_orders_streams_of_two_devices() {
    check("cross_device_event", CROSS, Some("RAW"));
}

#[test]
fn every_scenario_has_a_test() {
    let listed = run_with(&semantics(), &["list"], RunOptions { native: true, ..Default::default() }).stdout();
    let source = std::fs::read_to_string(file!()).unwrap() + &std::fs::read_to_string("tests/reports.rs").unwrap();
    for name in listed.lines().map(|l| l.split(' ').next().unwrap()) {
        assert!(source.contains(&format!("\"{name}\"")), "scenario {name} has no test");
    }
}

// ---- Every hooked family: without its hook's call into the model, its test fails ----------

#[test]
fn a_kernel_launched_with_cu_launch_kernel_ex_is_checked() {
    check("launch_kernel_ex", CROSS, Some("RAW"));
}

#[test]
fn a_programmatic_event_attribute_is_a_record_after_the_kernel() {
    check("launch_programmatic_event", CROSS, Some("RAW"));
}

#[test]
fn a_launch_completion_event_attribute_is_a_record_after_the_kernel() {
    check("launch_completion_event", CROSS, Some("RAW"));
}

#[test]
fn programmatic_stream_serialization_is_taken_as_ordered_and_noted() {
    let racy = check("programmatic_stream_serialization", CROSS, Some("RAW"));
    // Both twins' dependent launch is noted: where it waits for the kernel ahead of it is
    // not seen.
    let fixed = run_twin("programmatic_stream_serialization", "fixed").report();
    for report in [&racy, &fixed] {
        let notes: Vec<_> = report.notes.iter().filter(|n| n.kind == "programmatic-launch").collect();
        assert_eq!(notes.len(), 1, "{:?}", report.notes);
        assert!(notes[0].message.contains("grid-dependency wait"), "{}", notes[0].message);
    }
}

#[test]
fn a_cooperative_launch_is_checked() {
    check("cooperative_launch", CROSS, Some("RAW"));
}

#[test]
fn each_copy_of_a_batch_reads_its_source() {
    let racy = check("memcpy_batch", CROSS, Some("RAW"));
    assert_eq!(second_apis(&racy), ["cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2"]);
    assert_eq!(racy.races.len(), 2, "only the copies from x race");
}

#[test]
fn the_3d_copies_read_their_rows() {
    let racy = check("copy_3d", CROSS, Some("RAW"));
    assert_eq!(second_apis(&racy), ["cuMemcpy3DAsync_v2", "cuMemcpy3D_v2"]);
}

#[test]
fn a_3d_peer_copy_reads_its_rows() {
    check("copy_3d_peer", CROSS, Some("RAW"));
}

#[test]
fn every_memset_width_writes_its_bytes() {
    let racy = check("memset_widths", CROSS, Some("WAW"));
    let mut expected = [
        "cuMemsetD8_v2",
        "cuMemsetD16_v2",
        "cuMemsetD32_v2",
        "cuMemsetD2D8_v2",
        "cuMemsetD2D16_v2",
        "cuMemsetD2D32_v2",
        "cuMemsetD8Async",
        "cuMemsetD16Async",
        "cuMemsetD32Async",
        "cuMemsetD2D8Async",
        "cuMemsetD2D16Async",
        "cuMemsetD2D32Async",
    ];
    expected.sort_unstable();
    assert_eq!(second_apis(&racy), expected);
}

#[test]
fn a_2d_memset_writes_its_rows_or_their_cover_and_no_more() {
    let racy = check("memset_2d_rows", CROSS, Some("WAW"));
    assert_eq!(racy.races.len(), 2, "the last row of each memset");
}

#[test]
fn a_batch_of_memory_operations_orders_like_its_operations() {
    check("batch_mem_op", CROSS, Some("RAW"));
}

#[test]
fn the_64_bit_value_wait_orders_after_the_write() {
    check("wait_value_64", CROSS, Some("RAW"));
}

#[test]
fn a_mapped_virtual_memory_range_is_a_buffer() {
    let racy = check("virtual_memory", CROSS, Some("RAW"));
    assert_eq!(racy.races[0].buffer.kind, "mapped");
}

#[test]
fn registered_host_memory_is_a_buffer() {
    let racy = check("registered_host_memory", CROSS, Some("RAW"));
    assert_eq!(racy.races[0].buffer.kind, "registered-host");
}

#[test]
fn managed_memory_is_a_buffer() {
    let racy = check("managed_memory", CROSS, Some("RAW"));
    assert_eq!(racy.races[0].buffer.kind, "managed");
}

#[test]
fn pitched_memory_is_a_buffer() {
    check("pitched_memory", CROSS, Some("RAW"));
}

#[test]
fn an_allocation_from_a_pool_is_stream_ordered() {
    check("pool_allocation", "use-before-alloc", None);
}

#[test]
fn an_event_recorded_with_flags_orders_its_waiters() {
    check("event_record_with_flags", CROSS, Some("RAW"));
}

/// With the driver unable to name kernels (`cuFuncGetName`, `cuKernelGetName` fail, as before
/// CUDA 12.3), the names come from `cuLibraryGetKernel` and `cuKernelGetFunction` alone.
#[test]
fn library_kernels_are_named_by_their_hooks() {
    check("library_kernels", CROSS, Some("WAR"));
    let env = vec![
        ("STANDIN_DEFER_CALLBACKS", "1".to_string()),
        ("STANDIN_FAIL", "cuFuncGetName:*:500,cuKernelGetName:*:500".to_string()),
    ];
    for (twin, races) in [("racy", 1), ("fixed", 0)] {
        let run =
            run_with(&semantics(), &["library_kernels", twin], RunOptions { env: env.clone(), ..Default::default() });
        run.assert_ran();
        assert_eq!(run.report().races.len(), races, "{twin} without the driver's names");
    }
}

#[test]
fn a_kernel_handed_out_without_its_name_is_learnt_from_the_driver() {
    check("enumerated_library_kernels", CROSS, Some("WAR"));
}

#[test]
fn a_stream_the_shim_did_not_see_made_is_described_by_the_driver() {
    let racy = check("green_context_stream", CROSS, Some("RAW"));
    assert_eq!(racy.races.len(), 1, "only x: the context synchronize ordered y");
}

#[test]
fn destroying_a_context_waits_for_its_work() {
    check("context_destroy", CROSS, Some("RAW"));
}

#[test]
fn array_copies_touch_their_host_side() {
    let racy = check("array_copies", CROSS, None);
    assert_eq!(
        second_apis(&racy),
        ["cuMemcpyAtoHAsync_v2", "cuMemcpyAtoH_v2", "cuMemcpyHtoAAsync_v2", "cuMemcpyHtoA_v2"]
    );
    assert!(racy.races.iter().all(|r| r.buffer.kind == "pinned-host"), "{:?}", racy.races);
}

/// The races of `report` on arrays whose second operation is `api`: (access, range start, end).
fn array_accesses<'a>(report: &'a streamsan::report::Report, api: &str) -> Vec<(&'a str, &'a str, &'a str)> {
    let mut found: Vec<_> = report
        .races
        .iter()
        .filter(|r| r.buffer.kind == "array" && r.second.api == api)
        .map(|r| {
            let range = r.second.range.as_ref().expect("an access has a range");
            (r.second.access.as_str(), range.start.as_str(), range.end.as_str())
        })
        .collect();
    found.sort_unstable();
    found
}

#[test]
fn every_copy_with_an_array_side_touches_the_array() {
    let racy = check("array_sides", CROSS, None);
    assert_eq!(
        second_apis(&racy),
        [
            "cuMemcpyAtoA_v2",
            "cuMemcpyAtoD_v2",
            "cuMemcpyAtoHAsync_v2",
            "cuMemcpyAtoH_v2",
            "cuMemcpyDtoA_v2",
            "cuMemcpyHtoAAsync_v2",
            "cuMemcpyHtoA_v2"
        ]
    );
    assert!(racy.races.iter().all(|r| r.buffer.kind == "array" && r.buffer.size == 2048), "{:?}", racy.races);
    // Each copy touches its own 256-byte block, named by its offsets in the array; cuMemcpyAtoA
    // reads one array and writes the other.
    assert_eq!(array_accesses(&racy, "cuMemcpyAtoD_v2"), [("read", "0x200", "0x300")]);
    assert_eq!(array_accesses(&racy, "cuMemcpyDtoA_v2"), [("write", "0x300", "0x400")]);
    assert_eq!(array_accesses(&racy, "cuMemcpyAtoA_v2"), [("read", "0x600", "0x700"), ("write", "0x700", "0x800")]);
    // An array is named by its handle, not by the keys the model keeps it at.
    let handle = u64::from_str_radix(racy.races[0].buffer.address.trim_start_matches("0x"), 16).unwrap();
    assert!(handle != 0 && handle < 1 << 63, "{}", racy.races[0].buffer.address);
    assert_eq!(racy.races[0].buffer.allocation.api, "cuArrayCreate_v2");
}

#[test]
fn destroying_an_array_is_a_synchronous_free() {
    let racy = check("array_destroy_race", "free-race", None);
    let race = &racy.races[0];
    assert_eq!((race.buffer.kind.as_str(), race.first.api.as_str()), ("array", "cuMemcpy3DPeerAsync"));
    assert_eq!(race.second.api, "cuArrayDestroy");
}

#[test]
fn destroying_a_mipmapped_array_frees_its_levels() {
    let racy = check("mipmap_destroy_race", "free-race", None);
    let race = &racy.races[0];
    assert_eq!((race.buffer.kind.as_str(), race.buffer.size), ("array", 256), "level 1 of 512 elements");
    assert_eq!(
        (race.buffer.allocation.api.as_str(), race.second.api.as_str()),
        ("cuMipmappedArrayGetLevel", "cuMipmappedArrayDestroy")
    );
}

#[test]
fn a_mipmap_level_is_an_array_of_its_own_size() {
    let racy = check("mipmap_levels", CROSS, Some("RAW"));
    assert_eq!(array_accesses(&racy, "cuMemcpy2DAsync_v2"), [("read", "0x180", "0x1c0")]);
    assert_eq!(racy.races[0].buffer.size, 512, "16 x 8 four-byte elements");
}

#[test]
fn a_copy_covers_an_array_of_unknown_element_size_whole() {
    check("array_of_unknown_element_size", CROSS, Some("RAW"));
}

#[test]
fn a_level_of_a_3d_mipmap_has_its_depth_halved_and_of_a_layered_one_its_layers() {
    let racy = check("mipmap_3d_levels", CROSS, Some("WAR"));
    let mut sizes: Vec<u64> = racy.races.iter().map(|r| r.buffer.size).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1024, 3072], "16 x 8 x 2 and 16 x 8 x 6 four-byte elements");
}

#[test]
fn a_2d_or_3d_copy_touches_the_rows_of_its_array() {
    let racy = check("array_strided_copies", CROSS, None);
    assert_eq!(
        second_apis(&racy),
        [
            "cuGraphAddMemcpyNode",
            "cuMemcpy2DAsync_v2",
            "cuMemcpy2D_v2",
            "cuMemcpy3DAsync_v2",
            "cuMemcpy3DPeer",
            "cuMemcpy3DPeerAsync",
            "cuMemcpy3D_v2"
        ]
    );
    assert_eq!(array_accesses(&racy, "cuMemcpy2D_v2"), [("read", "0x0", "0x40")]);
    assert_eq!(array_accesses(&racy, "cuMemcpy2DAsync_v2"), [("write", "0x180", "0x1c0")]);
}

#[test]
fn a_3d_copy_touches_the_slice_it_names() {
    let racy = check("array_slices", CROSS, Some("RAW"));
    assert_eq!(array_accesses(&racy, "cuMemcpy3DAsync_v2"), [("read", "0x380", "0x3c0")]);
}

#[test]
fn each_operation_of_a_3d_batch_touches_its_pointers_and_arrays() {
    let racy = check("memcpy_3d_batch", CROSS, None);
    assert_eq!(second_apis(&racy), ["cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_v2"]);
    assert_eq!(racy.races.len(), 4, "x twice, the array's rows 2-3 and 6-7");
    assert_eq!(array_accesses(&racy, "cuMemcpy3DBatchAsync"), [("read", "0x80", "0xc0"), ("write", "0x180", "0x1c0")]);
}

#[test]
fn a_batched_copy_s_pointer_operand_has_rows_of_the_array_s_elements() {
    check("batch_3d_pointer_rows", CROSS, Some("RAW"));
}

#[test]
fn a_batched_copy_s_array_offset_is_in_elements() {
    check("batch_3d_array_offset", CROSS, Some("RAW"));
}

#[test]
fn managed_memory_hints_order_nothing() {
    check("managed_memory_hints", CROSS, Some("RAW"));
}

#[test]
fn memory_opened_from_an_ipc_handle_is_a_buffer_and_noted() {
    let racy = check("ipc_memory", CROSS, Some("RAW"));
    assert_eq!(racy.races[0].buffer.kind, "imported");
    // Opened in the process that exported it, which a real driver refuses: no other process
    // of the run exported it, and what the exporter does to it is not seen: said once.
    let notes: Vec<_> = racy.notes.iter().filter(|n| n.kind == "ipc-import").collect();
    assert_eq!(notes.len(), 1, "{:?}", racy.notes);
    assert!(notes[0].message.contains("no process run under streamsan exported"), "{}", notes[0].message);
}

#[test]
fn a_pointer_imported_from_a_pool_is_a_buffer() {
    let racy = check("pool_import", CROSS, Some("RAW"));
    assert_eq!(racy.races[0].buffer.kind, "imported");
}

#[test]
fn an_external_semaphore_orders_like_an_event() {
    check("external_semaphore", CROSS, Some("RAW"));
}

#[test]
fn a_refused_call_tells_the_model_nothing() {
    check("refused_wait", CROSS, Some("RAW"));
    assert!(!run_twin("refused_wait", "racy").stderr().contains("unexpected status"));
}

#[test]
fn a_refused_instantiation_leaves_the_executable_graph_as_it_was() {
    check("refused_instantiate", CROSS, Some("WAW"));
    assert!(!run_twin("refused_instantiate", "racy").stderr().contains("unexpected status"));
}
