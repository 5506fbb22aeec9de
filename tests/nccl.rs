//! NCCL collectives (`docs/semantics.md#collectives-nccl`): each scenario of
//! `tests/scenarios/nccl.c` as a racy and a fixed twin, run through the shim against the
//! stand-in driver and the stand-in `libnccl.so.2`, with NCCL linked and with NCCL opened by
//! `dlopen`; and every hooked NCCL name passing its arguments and status through.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::*;

/// `tests/scenarios/nccl.c`, linked with `-lnccl` or (`dlopen`) opening NCCL itself.
fn program(dlopen: bool) -> PathBuf {
    let dir = format!("-L{}", driver_dir().display());
    if dlopen {
        compile_c_as("nccl", "nccl_dlopen", &["-DNCCL_DLOPEN", &dir, "-lcuda", "-ldl"])
    } else {
        compile_c_as("nccl", "nccl", &[&dir, "-lnccl", "-lcuda"])
    }
}

fn run_twin(program: &Path, scenario: &str, twin: &str) -> Run {
    let run = run(program, &[scenario, twin]);
    run.assert_ran();
    run.assert_reports_match_the_schema();
    let native = run_with(program, &[scenario, twin], RunOptions { native: true, ..Default::default() });
    assert_eq!(native.stdout(), run.stdout(), "{scenario} {twin}: output changed");
    assert_eq!(native.output.status.code(), Some(0), "{scenario} {twin} natively: {}", native.stderr());
    run
}

/// The racy twin reports a cross-stream race of `hazard` whose NCCL side is `api`; the fixed
/// twin reports nothing.
fn check_with(program: &Path, scenario: &str, hazard: &str, api: &str) {
    let racy = run_twin(program, scenario, "racy").report();
    let race = racy.races_of("cross-stream-race").find(|r| r.hazard.map(|h| h.as_str()) == Some(hazard));
    let race = race.unwrap_or_else(|| {
        panic!(
            "{scenario} racy: expected {hazard}, got {:?}",
            racy.races.iter().map(|r| (&r.kind, &r.hazard)).collect::<Vec<_>>()
        )
    });
    assert!(race.first.api == api || race.second.api == api, "{scenario}: {} / {}", race.first.api, race.second.api);
    let fixed = run_twin(program, scenario, "fixed").report();
    assert!(
        fixed.races.is_empty(),
        "{scenario} fixed: {:?}",
        fixed.races.iter().map(|r| (&r.kind, &r.hazard, &r.first.api, &r.second.api)).collect::<Vec<_>>()
    );
}

fn check(scenario: &str, hazard: &str, api: &str) {
    check_with(&program(false), scenario, hazard, api);
}

#[test]
fn an_all_reduce_result_read_before_the_wait_is_a_race() {
    check("all_reduce_read_before_wait", "RAW", "ncclAllReduce");
}

#[test]
fn an_all_reduce_result_read_on_a_side_stream_before_the_wait_is_a_race() {
    check("side_stream_read_before_wait", "RAW", "ncclAllReduce");
}

#[test]
fn the_broadcast_root_reads_its_source() {
    check("broadcast_source_overwritten", "WAR", "ncclBroadcast");
}

#[test]
fn an_all_gather_writes_one_block_per_rank_and_no_more() {
    check("all_gather_receive_range", "RAW", "ncclAllGather");
}

#[test]
fn a_receive_writes_its_buffer() {
    check("recv_read_before_wait", "RAW", "ncclRecv");
}

#[test]
fn a_group_s_calls_are_issued_at_its_end() {
    check("group_issues_at_end", "RAW", "ncclAllReduce");
}

#[test]
fn a_refused_call_tells_the_model_nothing() {
    check("refused_call", "RAW", "ncclAllReduce");
    let fixed = run_twin(&program(false), "refused_call", "fixed");
    assert!(!fixed.stderr().contains("unexpected status"), "NCCL refused the call: {}", fixed.stderr());
}

#[test]
fn a_call_outside_any_group_is_issued_at_once() {
    check("call_outside_a_group", "RAW", "ncclAllReduce");
}

#[test]
fn a_collective_of_no_elements_touches_nothing() {
    check("all_reduce_of_no_elements", "RAW", "ncclAllReduce");
}

#[test]
fn a_dlopened_nccl_is_followed_too() {
    check_with(&program(true), "all_reduce_read_before_wait", "RAW", "ncclAllReduce");
    let run = run(&program(true), &["all_reduce_read_before_wait", "racy"]);
    assert_eq!(run.intercepted("ncclAllReduce"), 2);
    assert_eq!(run.received("ncclAllReduce"), 2);
}

#[test]
fn every_scenario_has_a_test() {
    let listed = run_with(&program(false), &["list"], RunOptions { native: true, ..Default::default() }).stdout();
    let source = std::fs::read_to_string(file!()).unwrap();
    for name in listed.lines().map(|l| l.split(' ').next().unwrap()) {
        assert!(source.contains(&format!("\"{name}\"")), "scenario {name} has no test");
    }
}

/// Every hooked NCCL name, looked up with `dlsym` in a `dlopen`ed `libnccl.so.2` and called
/// with sentinel arguments, reaches the stand-in with the same arguments, and its status
/// comes back unchanged, injected errors included.
#[test]
fn every_hooked_nccl_function_passes_its_arguments_and_status_through() {
    let exe = artifacts().join("streamsan-fidelity");
    for (env, status) in [(vec![], None), (vec![("STANDIN_FAIL", "*:1:999".to_string())], Some("-> 999"))] {
        let run = run_with(&exe, &["nccl"], RunOptions { env, ..Default::default() });
        run.assert_ran();
        assert!(!run.stdout().contains("not found"), "{}", run.stdout());
        let program: Vec<String> = run.stdout().lines().filter(|l| l.contains(") -> ")).map(str::to_string).collect();
        assert_eq!(program.len(), 13, "{}", run.stdout());
        let names: BTreeSet<&str> = program.iter().map(|l| &l[..l.find('(').unwrap()]).collect();
        let received: Vec<String> =
            run.calls.iter().filter(|l| names.contains(&l[..l.find('(').unwrap()])).cloned().collect();
        assert_eq!(program, received);
        for line in &program {
            let name = &line[..line.find('(').unwrap()];
            assert_eq!(run.report().intercepted.get(name), Some(&1), "{name}");
            if let Some(status) = status {
                assert!(line.ends_with(status), "{line}");
            }
        }
    }
}
