//! Exact and learnt footprints end to end on the stand-in: the shim, the footprint engine's
//! host half and the model's deferred checks, with the stand-in Compute Sanitizer library
//! playing the device (it writes the table the patch would, for `footprint_*` kernels:
//! `tests/scenarios/footprint.c`). Everything but the device code runs as on a GPU.

mod common;

use common::{compile_c, link_cuda, run_with, standin_sanitizer, Run, RunOptions};

fn footprint_program() -> std::path::PathBuf {
    compile_c("footprint", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>())
}

/// Runs a scenario with `footprint=MODE` and the stand-in sanitizer; `extra` more variables.
fn run_mode(scenario: &str, twin: &str, mode: &str, extra: &[(&'static str, String)]) -> Run {
    let mut env = vec![
        ("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string()),
        ("STREAMSAN_OPTIONS", format!("footprint={mode}")),
    ];
    env.extend(extra.iter().cloned());
    let run = run_with(&footprint_program(), &[scenario, twin], RunOptions { env, ..Default::default() });
    run.assert_ran();
    run.assert_reports_match_the_schema();
    assert_eq!(run.stdout(), format!("footprint {scenario} {twin}: done\n"), "the program's own output, unchanged");
    run
}

/// (kind, hazard, first access, second access) of each race.
fn races(run: &Run) -> Vec<(String, Option<String>, String, String)> {
    run.reports()
        .iter()
        .flat_map(|r| r.races.iter())
        .map(|r| {
            (
                r.kind.to_string(),
                r.hazard.map(|h| h.to_string()),
                r.first.access.to_string(),
                r.second.access.to_string(),
            )
        })
        .collect()
}

fn notes(run: &Run) -> Vec<String> {
    run.reports().iter().flat_map(|r| r.notes.iter()).map(|n| n.kind.to_string()).collect()
}

fn race(kind: &str, hazard: Option<&str>, first: &str, second: &str) -> (String, Option<String>, String, String) {
    (kind.into(), hazard.map(Into::into), first.into(), second.into())
}

#[test]
fn an_interior_pointer_race_is_found_by_its_measured_footprint_and_missed_by_its_parameters() {
    assert_eq!(
        races(&run_mode("interior", "racy", "exact", &[])),
        vec![race("cross-stream-race", Some("RAW"), "write", "read")]
    );
    assert_eq!(races(&run_mode("interior", "fixed", "exact", &[])), vec![]);
    // The parameters name two different bytes of x: nothing to see.
    assert_eq!(races(&run_mode("interior", "racy", "params", &[])), vec![]);
}

#[test]
fn a_buffer_inside_a_by_value_struct_is_measured() {
    assert_eq!(
        races(&run_mode("struct", "racy", "exact", &[])),
        vec![race("cross-stream-race", Some("WAW"), "write", "write")]
    );
    assert_eq!(races(&run_mode("struct", "fixed", "exact", &[])), vec![]);
}

#[test]
fn an_operation_issued_after_a_pending_launch_is_checked_against_its_footprint() {
    // The memset was checked before the kernel's footprint was known: the log finds it.
    assert_eq!(
        races(&run_mode("later", "racy", "exact", &[])),
        vec![race("cross-stream-race", Some("WAR"), "read", "write")]
    );
    assert_eq!(races(&run_mode("later", "fixed", "exact", &[])), vec![]);
}

#[test]
fn launches_read_out_of_issue_order_are_checked_once_and_without_false_races() {
    assert_eq!(
        races(&run_mode("out-of-order", "racy", "exact", &[])),
        vec![race("cross-stream-race", Some("RAW"), "write", "read")]
    );
    assert_eq!(races(&run_mode("out-of-order", "fixed", "exact", &[])), vec![]);
}

#[test]
fn many_disjoint_ranges_of_one_launch_are_kept_compact_and_still_checked() {
    // 256 pieces of 4 bytes, 4 KiB apart (several 64 KiB granules, joined to a few ranges).
    let racy = races(&run_mode("strided", "racy", "exact", &[]));
    assert_eq!(racy, vec![race("cross-stream-race", Some("WAW"), "write", "write")]);
    assert_eq!(races(&run_mode("strided", "fixed", "exact", &[])), vec![]);
}

#[test]
fn atomics_of_two_streams_are_no_race_but_an_atomic_and_a_read_are() {
    assert_eq!(
        races(&run_mode("atomics", "racy", "exact", &[])),
        vec![race("cross-stream-race", Some("RAW"), "atomic", "read")]
    );
    assert_eq!(races(&run_mode("atomics", "fixed", "exact", &[])), vec![]);
}

#[test]
fn a_free_issued_while_a_launch_is_pending_is_checked_against_its_footprint() {
    let racy = races(&run_mode("free", "racy", "exact", &[]));
    assert!(racy.contains(&race("free-race", None, "read", "free")), "{racy:?}");
    // Freed after the kernel: the kernel's bytes are in memory freed later, not a use after free.
    assert_eq!(races(&run_mode("free", "fixed", "exact", &[])), vec![]);
}

#[test]
fn learn_measures_a_kernel_once_per_key_and_applies_what_it_learnt() {
    let dir = std::env::temp_dir().join(format!("streamsan-learn-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let log = ("STANDIN_SANITIZER_LOG", dir.display().to_string());
    let run = run_with(
        &footprint_program(),
        &["interior", "racy", "3"],
        RunOptions {
            env: vec![
                ("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string()),
                ("STREAMSAN_OPTIONS", "footprint=learn".into()),
                log.clone(),
            ],
            ..Default::default()
        },
    );
    run.assert_ran();
    let measured = std::fs::read_to_string(&dir).unwrap_or_default();
    // Two keys (the writer's and the reader's scalars differ), each measured once.
    assert_eq!(measured.lines().count(), 2, "{measured}");
    let found =
        run.reports().iter().flat_map(|r| r.races.iter()).map(|r| (r.kind.to_string(), r.count)).collect::<Vec<_>>();
    // Rounds 2 and 3 are checked at issue with the learnt extents: the same race, 3 times.
    assert_eq!(found, vec![("cross-stream-race".to_string(), 3)]);
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn without_the_library_or_under_another_tool_the_shim_falls_back_to_parameters_with_a_note() {
    // The later value of a variable wins: no library anywhere.
    let missing = run_mode(
        "interior",
        "racy",
        "exact",
        &[("STREAMSAN_SANITIZER_LIB", "/nonexistent/libsanitizer-public.so".into())],
    );
    assert_eq!(notes(&missing), vec!["footprint-unavailable".to_string()]);
    assert_eq!(races(&missing), vec![], "parameters only: the interior race is not seen");
    let taken = run_mode("interior", "racy", "exact", &[("STANDIN_SANITIZER_TAKEN", "1".into())]);
    assert_eq!(notes(&taken), vec!["footprint-unavailable".to_string()]);
    let report = taken.reports();
    assert!(report[0].notes[0].message.contains("compute-sanitizer"), "{}", report[0].notes[0].message);
}
