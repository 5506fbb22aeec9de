//! Exact and learnt footprints end to end on the stand-in: the shim, the footprint engine's
//! host half and the model's deferred checks, with the stand-in Compute Sanitizer library
//! playing the device (it writes the table the patch would, for `footprint_*` kernels:
//! `tests/scenarios/footprint.c`). Everything but the device code runs as on a GPU.

use crate::common::{compile_c, link_cuda, run_with, scratch, standin_sanitizer, Run, RunOptions};

fn footprint_program() -> std::path::PathBuf {
    compile_c("footprint", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>())
}

/// Runs a scenario with `footprint=MODE` and the stand-in sanitizer; `extra` more variables.
fn run_mode(scenario: &str, twin: &str, mode: &str, extra: &[(&'static str, String)]) -> Run {
    run_rounds(scenario, twin, mode, 1, extra).0
}

/// Runs `ROUNDS` rounds of a scenario with `footprint=MODE`, the engine's counters traced;
/// returns the run and the stand-in sanitizer's log (`measured NAME`, `patch MODULE`, ...).
fn run_rounds(
    scenario: &str,
    twin: &str,
    mode: &str,
    rounds: u32,
    extra: &[(&'static str, String)],
) -> (Run, Vec<String>) {
    let log = scratch("sanitizer").join("sanitizer.log");
    let mut env = vec![
        ("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string()),
        ("STREAMSAN_OPTIONS", format!("footprint={mode}")),
        ("STREAMSAN_FOOTPRINT_TRACE", "counters".into()),
        ("STANDIN_SANITIZER_LOG", log.display().to_string()),
    ];
    env.extend(extra.iter().cloned());
    let rounds = rounds.to_string();
    let run = run_with(&footprint_program(), &[scenario, twin, &rounds], RunOptions { env, ..Default::default() });
    run.assert_ran();
    run.assert_reports_match_the_schema();
    assert_eq!(run.stdout(), format!("footprint {scenario} {twin}: done\n"), "the program's own output, unchanged");
    let log = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
    (run, log)
}

/// Lines of the stand-in sanitizer's log that are `WHAT NAME`.
fn logged(log: &[String], what: &str, name: &str) -> usize {
    log.iter().filter(|l| **l == format!("{what} {name}")).count()
}

/// The number before `after` in the engine's counters (`STREAMSAN_FOOTPRINT_TRACE=counters`).
fn counter(run: &Run, after: &str) -> u64 {
    let stderr = run.stderr();
    let at = stderr.find(after).unwrap_or_else(|| panic!("no counter {after:?} in {stderr}"));
    let before = stderr[..at].trim_end();
    before[before.rfind(|c: char| !c.is_ascii_digit()).map_or(0, |i| i + 1)..].parse().expect("a count")
}

/// The engine's counters of module variables copied: the variables, the copier's launches
/// and the driver's copies.
fn variables_copied(run: &Run) -> (u64, u64, u64) {
    (counter(run, " variables by"), counter(run, " launches of the copier"), counter(run, " copies by the driver"))
}

/// Each race's (kind, hazard, first access, second access) and how often it was found.
fn race_counts(run: &Run) -> Vec<(RaceShape, u64)> {
    run.reports()
        .iter()
        .flat_map(|r| r.races.iter())
        .map(|r| {
            let key = (
                r.kind.to_string(),
                r.hazard.map(|h| h.to_string()),
                r.first.access.to_string(),
                r.second.access.to_string(),
            );
            (key, r.count)
        })
        .collect()
}

/// A race's kind, hazard, first access and second access.
type RaceShape = (String, Option<String>, String, String);

/// (kind, hazard, first access, second access) of each race.
fn races(run: &Run) -> Vec<RaceShape> {
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

fn race(kind: &str, hazard: Option<&str>, first: &str, second: &str) -> RaceShape {
    (kind.into(), hazard.map(Into::into), first.into(), second.into())
}

/// The race most scenarios have: a read on one stream of what a kernel on another wrote.
fn write_then_read() -> RaceShape {
    race("cross-stream-race", Some("RAW"), "write", "read")
}

/// Asserts that the scenario's fixed twin reports nothing under `mode` over `rounds` rounds.
fn assert_fixed_clean(scenario: &str, mode: &str, rounds: u32) {
    let (fixed, _) = run_rounds(scenario, "fixed", mode, rounds, &[]);
    assert_eq!(races(&fixed), vec![], "{scenario}: the fixed twin under {mode}");
}

/// In `footprint=exact`, the scenario's racy twin finds exactly `expected`, its fixed twin
/// nothing.
fn assert_exact_twins(scenario: &str, expected: RaceShape) {
    assert_eq!(races(&run_mode(scenario, "racy", "exact", &[])), vec![expected], "{scenario}: the racy twin");
    assert_eq!(races(&run_mode(scenario, "fixed", "exact", &[])), vec![], "{scenario}: the fixed twin");
}

#[test]
fn an_interior_pointer_race_is_found_by_its_measured_footprint_and_missed_by_its_parameters() {
    assert_exact_twins("interior", write_then_read());
    // The parameters name two different bytes of x: nothing to see.
    assert_eq!(races(&run_mode("interior", "racy", "params", &[])), vec![]);
}

#[test]
fn the_engine_prints_only_what_its_trace_asks_for() {
    let (read, counters) = ("streamsan: footprint of launch", "streamsan: footprints:");
    let traced = run_mode("interior", "racy", "exact", &[("STREAMSAN_FOOTPRINT_TRACE", "1".into())]);
    assert!(traced.stderr().contains(read) && traced.stderr().contains(counters), "{}", traced.stderr());
    let counted = run_mode("interior", "racy", "exact", &[]);
    assert!(!counted.stderr().contains(read) && counted.stderr().contains(counters), "{}", counted.stderr());
    let untraced = run_mode("interior", "racy", "exact", &[("STREAMSAN_FOOTPRINT_TRACE", String::new())]);
    assert!(!untraced.stderr().contains("streamsan: footprint"), "{}", untraced.stderr());
}

#[test]
fn the_learn_trace_says_why_each_launch_is_measured() {
    // Each kernel's first launch is a new kernel's; its key's 4th launch checks what was
    // learnt; the rounds between are predicted.
    let (run, _) = run_rounds("interior", "racy", "learn", 5, &[("STREAMSAN_FOOTPRINT_TRACE", "1".into())]);
    let stderr = run.stderr();
    let reasons: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("streamsan: footprint plan: measure ("))
        .filter_map(|l| l.split(')').next())
        .collect();
    assert!(reasons.contains(&"new kernel") && reasons.contains(&"sample"), "{stderr}");
    assert!(reasons.iter().all(|r| ["new kernel", "new key", "sample"].contains(r)), "{reasons:?}");
}

#[test]
fn a_buffer_inside_a_by_value_struct_is_measured() {
    assert_exact_twins("struct", race("cross-stream-race", Some("WAW"), "write", "write"));
}

#[test]
fn a_struct_of_two_buffers_races_only_through_the_buffer_both_kernels_touch() {
    // Each struct holds both addresses; each kernel follows one. A measurement replaces the
    // parameters' guess: the address a kernel never followed is no access.
    assert_exact_twins("pair", race("cross-stream-race", Some("WAW"), "write", "write"));
    assert_fixed_clean("pair", "learn", 3);
}

#[test]
fn interleaved_strided_writes_keep_their_gaps() {
    // x[0::2] against x[1::2]: disjoint bytes, no race; x[0::2] against x[0::4]: a race.
    assert_exact_twins("interleaved", race("cross-stream-race", Some("WAW"), "write", "write"));
    assert_fixed_clean("interleaved", "learn", 3);
}

#[test]
fn a_learnt_footprint_that_moves_with_device_data_is_caught_by_a_sample_and_replaced() {
    // The gather's parameters never change; its index moves what it writes at round 20, into
    // bytes B writes. Exact finds the race in each of rounds 20 to 39.
    let rounds = 40;
    let (exact, _) = run_rounds("indirect", "racy", "exact", rounds, &[]);
    let found = |run: &Run| race_counts(run).iter().map(|(_, n)| n).sum::<u64>();
    assert_eq!(found(&exact), 20, "{:?}", race_counts(&exact));
    // Learnt at round 0, applied after, measured to check at its 4th, 8th, 16th and 32nd
    // launches (rounds 3, 7, 15, 31): round 31 contradicts what was learnt and replaces it,
    // round 32 is measured again, and every round from 31 on finds the race.
    let (learn, log) = run_rounds("indirect", "racy", "learn", rounds, &[]);
    assert_eq!(logged(&log, "measured", "footprint_indirect"), 7, "{log:?}");
    assert_eq!(found(&learn), 9, "{:?}", race_counts(&learn));
    assert_fixed_clean("indirect", "learn", rounds);
}

#[test]
fn an_operation_issued_after_a_pending_launch_is_checked_against_its_footprint() {
    // The memset was checked before the kernel's footprint was known: the log finds it.
    assert_exact_twins("later", race("cross-stream-race", Some("WAR"), "read", "write"));
}

#[test]
fn launches_read_at_one_synchronization_each_get_their_own_table() {
    // The first and third of three measured launches are read together, the second's table
    // between theirs is not: the third's footprint, read from its own table, finds the race
    // (the second's would not, nor would the third's pointer alone).
    assert_exact_twins("gap", race("cross-stream-race", Some("WAW"), "write", "write"));
}

#[test]
fn a_table_read_is_zeroed_before_a_launch_gets_it_again() {
    // The patch only adds to a table: what the launch before wrote must not become the next
    // launch's footprint (here a write of x, racing with a memset the next launch does not
    // touch).
    assert_exact_twins("reuse", race("cross-stream-race", Some("WAW"), "write", "write"));
}

#[test]
fn launches_past_the_tables_stand_on_their_parameters_and_say_so() {
    // 4201 launches to measure, none read before the last, and 4096 tables a context: 105
    // go unmeasured, the last among them, and its race is still found through its pointer.
    let (run, _) = run_rounds("flood", "racy", "exact", 1, &[]);
    assert_eq!(counter(&run, " without a free table"), 4201 - 4096, "{}", run.stderr());
    assert!(notes(&run).contains(&"footprint-unmeasured".to_string()), "{:?}", notes(&run));
    assert_eq!(races(&run), vec![race("cross-stream-race", Some("RAW"), "write", "read-or-write")]);
    assert_fixed_clean("flood", "exact", 1);
}

#[test]
fn launches_captured_into_a_graph_give_their_tables_back() {
    // 4200 launches captured (more than the 4096 tables), then one measured: it finds a
    // table, and its footprint (not its pointer, which the memset does not cover) the race.
    let (run, _) = run_rounds("captured", "racy", "exact", 1, &[]);
    assert_eq!(counter(&run, " without a free table"), 0, "{}", run.stderr());
    assert_eq!(races(&run), vec![race("cross-stream-race", Some("WAW"), "write", "write")]);
    assert_eq!(races(&run_mode("captured", "fixed", "exact", &[])), vec![]);
}

#[test]
fn tables_the_library_could_not_zero_are_never_handed_out() {
    // sanitizerMemset fails: no chunk of tables is ready, so every launch stands on its
    // parameters, counted and noted, and the race its pointer shows is still found.
    let fail = [("STANDIN_SANITIZER_FAIL", "sanitizerMemset".to_string())];
    let run = run_mode("reuse", "racy", "exact", &fail);
    assert_eq!(counter(&run, " launches measured"), 0, "{}", run.stderr());
    assert_eq!(counter(&run, " without a free table"), 2, "{}", run.stderr());
    assert!(notes(&run).contains(&"footprint-unmeasured".to_string()), "{:?}", notes(&run));
    assert_eq!(races(&run).len(), 1, "{}", run.stderr());
}

#[test]
fn without_a_stream_of_its_own_the_engine_measures_nothing_and_says_so() {
    // sanitizerGetStreamHandle fails: the engine has no stream to read and zero tables on,
    // so no launch is measured, each stands on its parameters with a note, and the race its
    // pointer shows is still found.
    let fail = [("STANDIN_SANITIZER_FAIL", "sanitizerGetStreamHandle".to_string())];
    let run = run_mode("reuse", "racy", "exact", &fail);
    assert_eq!(counter(&run, " launches measured"), 0, "{}", run.stderr());
    assert!(notes(&run).contains(&"footprint-unmeasured".to_string()), "{:?}", notes(&run));
    assert_eq!(races(&run), vec![race("cross-stream-race", Some("WAR"), "read-or-write", "write")]);
}

#[test]
fn launches_read_out_of_issue_order_are_checked_once_and_without_false_races() {
    assert_exact_twins("out-of-order", write_then_read());
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
    assert_exact_twins("atomics", race("cross-stream-race", Some("RAW"), "atomic", "read"));
}

#[test]
fn an_input_and_an_output_in_one_granule_keep_their_own_kinds_of_access() {
    // Two kernels read one array and write its neighbours in the same 64 KiB granule: no
    // race unless they write the same one (a read-write hull over both would be a WAW).
    assert_exact_twins("neighbours", race("cross-stream-race", Some("WAW"), "write", "write"));
    assert_fixed_clean("neighbours", "learn", 3);
}

#[test]
fn an_array_between_two_a_kernel_reads_in_one_granule_is_not_theirs() {
    // A kernel reads two arrays of one granule; another writes the one between them: no race
    // (a hull over both reads would hold it), unless it writes one the kernel reads.
    assert_exact_twins("between", race("cross-stream-race", Some("WAR"), "read", "write"));
    assert_fixed_clean("between", "learn", 3);
}

#[test]
fn a_free_issued_while_a_launch_is_pending_is_checked_against_its_footprint() {
    let racy = races(&run_mode("free", "racy", "exact", &[]));
    assert!(racy.contains(&race("free-race", None, "read", "free")), "{racy:?}");
    // Freed after the kernel: the kernel's bytes are in memory freed later, not a use after free.
    assert_eq!(races(&run_mode("free", "fixed", "exact", &[])), vec![]);
}

/// Two launches racing on a buffer that a synchronous free then frees, their footprints read
/// only after it: the race stands (CuSan's 31 test on an H200).
#[test]
fn a_race_between_launches_read_after_their_buffer_is_freed_stands() {
    for mode in ["exact", "learn"] {
        let racy = races(&run_mode("freed_unread", "racy", mode, &[]));
        assert!(racy.contains(&race("cross-stream-race", Some("WAW"), "write", "write")), "{mode}: {racy:?}");
        assert_eq!(races(&run_mode("freed_unread", "fixed", mode, &[])), vec![], "{mode}");
    }
}

/// A kernel launched with programmatic stream serialization whose code never waits on its
/// grid dependencies reads what the kernel ahead of it on its stream writes: a race on one
/// stream, its fix the wait. One that waits is ordered, and noted (where it waits is not
/// known). Without the engine (`params`) neither is known: both are noted, neither reported.
#[test]
fn a_programmatic_launch_that_never_waits_races_with_the_kernel_ahead_of_it() {
    // Asked per launch (`cuLaunchKernelEx`) or per stream (`cuStreamSetAttribute`, then
    // cleared: the pair after it is ordered).
    for (scenario, mode) in [("programmatic", "exact"), ("programmatic", "learn"), ("programmatic_stream", "learn")] {
        let racy = run_mode(scenario, "racy", mode, &[]);
        assert_eq!(races(&racy), vec![write_then_read()], "{mode}");
        let report = &racy.reports()[0];
        let race = &report.races[0];
        assert_eq!(race.first.stream.label, race.second.stream.label, "one stream");
        assert_eq!(race.missing_wait.action.to_string(), "grid-dependency-wait");
        assert!(!notes(&racy).contains(&"programmatic-launch".to_string()), "{mode}");
        let fixed = run_mode(scenario, "fixed", mode, &[]);
        assert_eq!(races(&fixed), vec![], "{mode}");
        assert!(notes(&fixed).contains(&"programmatic-launch".to_string()), "{mode}");
    }
    for twin in ["racy", "fixed"] {
        let run = run_mode("programmatic", twin, "params", &[]);
        assert_eq!(races(&run), vec![], "params {twin}");
        assert!(notes(&run).contains(&"programmatic-launch".to_string()), "params {twin}");
    }
}

/// A dependent launched with programmatic stream serialization whose kernel waits on its grid
/// dependencies, its first wait found in its sm_90 code (`footprint_early`): what it reads
/// before the wait races with the kernel ahead of it on its stream, what it reads after it
/// does not, and weights written before both are no race; the split known, nothing is noted.
/// Measured (`exact`), and learnt then predicted (`learn`: the first round measured, the
/// others given what was learnt, their split with it).
#[test]
fn a_programmatic_launch_races_with_the_kernel_ahead_of_it_before_its_wait_only() {
    let early_read = write_then_read();
    for (mode, rounds) in [("exact", 2), ("learn", 3)] {
        let (racy, _) = run_rounds("programmatic_early", "racy", mode, rounds, &[]);
        assert_eq!(race_counts(&racy), vec![(early_read.clone(), u64::from(rounds))], "{mode}");
        let race = &racy.reports()[0].races[0];
        assert_eq!(race.first.stream.label, race.second.stream.label, "{mode}: one stream");
        assert_eq!(race.missing_wait.action.to_string(), "grid-dependency-wait", "{mode}");
        assert_eq!(race.second.kernel.as_deref(), Some("footprint_early"), "{mode}");
        assert!(!notes(&racy).contains(&"programmatic-launch".to_string()), "{mode}");
        let (fixed, _) = run_rounds("programmatic_early", "fixed", mode, rounds, &[]);
        assert_eq!(races(&fixed), vec![], "{mode}");
        assert!(!notes(&fixed).contains(&"programmatic-launch".to_string()), "{mode}");
    }
    // Where the split is not known (no engine; the engine not told where the function starts)
    // the dependent is ordered from its start, and noted.
    let no_start = [("STANDIN_SANITIZER_FAIL", "sanitizerGetFunctionPcAndSize".to_string())];
    for (mode, extra) in [("params", &[][..]), ("exact", &no_start[..])] {
        let run = run_mode("programmatic_early", "racy", mode, extra);
        assert_eq!(races(&run), vec![], "{mode} {extra:?}");
        assert!(notes(&run).contains(&"programmatic-launch".to_string()), "{mode} {extra:?}");
    }
}

/// The same dependent as a graph's kernel node reached through a programmatic edge: measured
/// at the graph's first launch, standing on that measurement at the second (`learn`), split
/// at both.
#[test]
fn a_programmatic_kernel_node_races_with_the_kernel_node_it_follows_before_its_wait_only() {
    for mode in ["exact", "learn"] {
        let (racy, _) = run_rounds("programmatic_early_captured", "racy", mode, 2, &[]);
        let early_read = write_then_read();
        assert_eq!(race_counts(&racy), vec![(early_read, 2)], "{mode}");
        let race = &racy.reports()[0].races[0];
        assert_eq!(race.first.stream.label, race.second.stream.label, "{mode}: one lane");
        assert_eq!(race.missing_wait.action.to_string(), "grid-dependency-wait", "{mode}");
        assert!(!notes(&racy).contains(&"programmatic-launch".to_string()), "{mode}");
        let (fixed, _) = run_rounds("programmatic_early_captured", "fixed", mode, 2, &[]);
        assert_eq!(races(&fixed), vec![], "{mode}");
        assert!(!notes(&fixed).contains(&"programmatic-launch".to_string()), "{mode}");
    }
}

/// The same pair in a graph, captured from the stream or built with a programmatic edge
/// (`cuGraphAddDependencies_v2`, `cuGraphAddNode_v2`): the dependent's node races with the writer's when its
/// kernel never waits, on one graph lane, its fix the wait; one that waits is ordered, and
/// noted at the graph's launch; without the engine both are noted, neither reported.
#[test]
fn a_programmatic_kernel_node_that_never_waits_races_with_the_kernel_node_it_follows() {
    for scenario in ["programmatic_captured", "programmatic_built", "programmatic_node"] {
        for mode in ["exact", "learn"] {
            let racy = run_mode(scenario, "racy", mode, &[]);
            let expected = vec![write_then_read()];
            assert_eq!(races(&racy), expected, "{scenario} {mode}");
            let race = &racy.reports()[0].races[0];
            assert_eq!(race.first.stream.label, race.second.stream.label, "{scenario}: one lane");
            assert_eq!(race.missing_wait.action.to_string(), "grid-dependency-wait", "{scenario}");
            assert!(!notes(&racy).contains(&"programmatic-launch".to_string()), "{scenario} {mode}");
            let fixed = run_mode(scenario, "fixed", mode, &[]);
            assert_eq!(races(&fixed), vec![], "{scenario} {mode}");
            assert!(notes(&fixed).contains(&"programmatic-launch".to_string()), "{scenario} {mode}");
        }
        for twin in ["racy", "fixed"] {
            let run = run_mode(scenario, twin, "params", &[]);
            assert_eq!(races(&run), vec![], "{scenario} params {twin}");
            assert!(notes(&run).contains(&"programmatic-launch".to_string()), "{scenario} params {twin}");
        }
    }
}

/// Batches from a stream-ordered pool whose addresses come back step after step, the
/// launches' footprints read only at the end: the fixed loop is clean, the racy one reports
/// only its reads before the batches' fills.
#[test]
fn launches_read_late_over_a_pool_s_reused_addresses_are_judged_by_their_own_buffers() {
    for mode in ["exact", "learn"] {
        let fixed = run_mode("pool_steps", "fixed", mode, &[]);
        assert_eq!(races(&fixed), vec![], "{mode}: fixed");
    }
}

#[test]
fn learn_measures_a_kernel_once_per_key_and_applies_what_it_learnt() {
    let (run, log) = run_rounds("interior", "racy", "learn", 3, &[]);
    // Two keys (the writer's and the reader's scalars differ), each measured once.
    assert_eq!(logged(&log, "measured", "footprint_touch"), 2, "{log:?}");
    // Rounds 2 and 3 are checked at issue with the learnt extents: the same race, 3 times.
    let found = race_counts(&run);
    assert_eq!(found, vec![(write_then_read(), 3)]);
}

#[test]
fn exact_measures_every_launch_and_learns_nothing() {
    let (run, log) = run_rounds("interior", "racy", "exact", 3, &[]);
    // The writer and the reader, in each of 3 rounds.
    assert_eq!(logged(&log, "measured", "footprint_touch"), 6, "{log:?}");
    assert_eq!(race_counts(&run), vec![(write_then_read(), 3)]);
}

#[test]
fn what_is_learnt_belongs_to_its_kernel() {
    let (racy, _) = run_rounds("same_words", "racy", "learn", 1, &[]);
    assert_eq!(races(&racy), vec![race("cross-stream-race", Some("WAW"), "write", "write")]);
    // footprint_beyond, launched with footprint_touch's words, uses what was learnt of it.
    assert_fixed_clean("same_words", "learn", 1);
}

#[test]
fn a_kernel_whose_table_overflows_is_learnt_and_its_cover_still_finds_the_race() {
    // 2,600 granules written: the table holds 2,048, the rest are one cover.
    let exact = run_mode("overflow", "racy", "exact", &[]);
    assert_eq!(races(&exact), vec![write_then_read()]);
    assert!(notes(&exact).contains(&"footprint-overflow".to_string()), "{:?}", notes(&exact));
    let (learn, log) = run_rounds("overflow", "racy", "learn", 3, &[]);
    // The writer and the reader measured once each: the overflowed key was learnt.
    assert_eq!(logged(&log, "measured", "footprint_touch"), 2, "{log:?}");
    assert_eq!(race_counts(&learn), vec![(write_then_read(), 3)]);
    let notes = notes(&learn);
    assert!(notes.contains(&"footprint-learnt-cover".to_string()), "{notes:?}");
    assert_eq!(counter(&learn, " with a cover"), 1, "{}", learn.stderr());
    assert_fixed_clean("overflow", "learn", 3);
}

#[test]
fn an_overflowed_tables_covers_keep_its_input_read_only() {
    // Two launches on two streams with no wait each read one large input and write a large
    // output of their own, more granules than a table holds: their covers keep the reads
    // apart from the writes, so the input both read is no race, an output both write is.
    for mode in ["exact", "learn"] {
        let (racy, _) = run_rounds("overflow_input", "racy", mode, 3, &[]);
        assert_eq!(races(&racy), vec![race("cross-stream-race", Some("WAW"), "write", "write")], "{mode}");
        assert_fixed_clean("overflow_input", mode, 3);
    }
}

#[test]
fn graphs_joined_by_an_external_event_race_only_where_nothing_orders_them() {
    // Warp's test_event_external: one graph adds to x and y and records an external event,
    // another waits on it and reads them, each launched on a stream of its own, four times.
    // The wait orders each second graph after its first; nothing orders the next first
    // graph after the second (racy: it writes what the second reads), unless a wait does.
    for mode in ["exact", "learn"] {
        let (racy, _) = run_rounds("external", "racy", mode, 1, &[]);
        let found = races(&racy);
        assert!(!found.is_empty(), "{mode}: the racy twin's race");
        for (kind, hazard, first, _) in &found {
            assert_eq!((kind.as_str(), hazard.as_deref(), first.as_str()), ("cross-stream-race", Some("WAR"), "read"));
        }
        assert_fixed_clean("external", mode, 1);
    }
}

#[test]
fn a_kernel_that_filled_its_table_is_measured_in_a_wide_one() {
    // Round 1's writer fills its table; the kernel's later launches (the reader's too: one
    // kernel) take wide tables, hold every granule, and overflow no more.
    let (exact, _) = run_rounds("overflow", "racy", "exact", 3, &[]);
    assert_eq!(counter(&exact, " overflowed"), 1, "{}", exact.stderr());
    assert_eq!(counter(&exact, " in wide tables"), 4, "{}", exact.stderr());
    assert_eq!(race_counts(&exact), vec![(write_then_read(), 3)]);
    assert_fixed_clean("overflow", "exact", 3);
}

#[test]
fn a_tensor_lists_small_arrays_in_one_granule_settle_wherever_they_lie() {
    // Six arrays of 3 KiB in one granule, 2 KiB apart, written through a by-value list; at
    // every round they lie elsewhere (every other round 512 bytes off a KiB) and in another
    // order. Each keeps its own bytes, the same relative to its pointer at every round: the
    // key is learnt once, only its checks (its 4th and 8th launch) are measured again, and
    // a read of the gap after an array, on another stream with no wait, is no race.
    let (run, log) = run_rounds("tensor_list", "racy", "learn", 8, &[]);
    assert_eq!(logged(&log, "measured", "footprint_list"), 3, "{log:?}");
    assert_eq!(race_counts(&run), vec![(write_then_read(), 8)]);
    assert_fixed_clean("tensor_list", "learn", 8);
}

#[test]
fn launches_that_find_no_wide_table_free_overflow_and_are_counted_apart() {
    // Round 1's launch fills its table; round 2 launches the kernel 70 times before it
    // synchronizes: 64 take wide tables (a context's all) and hold every granule, the other
    // 6 take common ones, which overflow, counted as launches that wanted a wide table.
    let (run, _) = run_rounds("overflow_burst", "racy", "exact", 2, &[]);
    assert_eq!(counter(&run, " in wide tables"), 64, "{}", run.stderr());
    assert_eq!(counter(&run, " overflowed,"), 7, "{}", run.stderr());
    assert_eq!(counter(&run, " wide and"), 0, "{}", run.stderr());
    assert_eq!(counter(&run, " common ones of launches that wanted a wide one"), 6, "{}", run.stderr());
}

#[test]
fn only_launches_as_large_as_one_that_filled_its_table_take_wide_ones() {
    // Round 1's launch over 64 blocks fills its table; round 2 launches the kernel 70 times
    // over one block, then over 64 again, before it synchronizes: the small launches take
    // common tables, leaving a wide one for the large launch, which overflows no more.
    let (run, _) = run_rounds("overflow_sizes", "racy", "exact", 2, &[]);
    assert_eq!(counter(&run, " in wide tables"), 1, "{}", run.stderr());
    assert_eq!(counter(&run, " overflowed,"), 1, "{}", run.stderr());
}

#[test]
fn a_step_count_that_changes_at_every_launch_does_not_keep_a_kernel_measured() {
    // footprint_step writes half of x, then a quarter, in turn, with a step count that is new
    // at every launch: a key per size once the step is seen not to move the footprint (kept in
    // the key, the step would make every launch a new key that the two sizes never agree on).
    let (run, log) = run_rounds("steps", "racy", "learn", 8, &[]);
    let measured = logged(&log, "measured", "footprint_step");
    // One launch per size, and the two further changes of the step that leave it out.
    assert_eq!(measured, 2 + streamsan::model::footprint::learnt::IGNORED_AFTER as usize, "{log:?}");
    assert_eq!(counter(&run, " words left out of keys"), 1, "{}", run.stderr());
    // Every round's race is found, measured or learnt.
    assert_eq!(race_counts(&run), vec![(write_then_read(), 8)]);
    assert_fixed_clean("steps", "learn", 8);
}

#[test]
fn a_byte_that_changes_beside_a_size_does_not_keep_a_kernel_measured() {
    // footprint_packed writes half of x, then a quarter, in turn: its 4-byte length shares an
    // 8-byte word with a byte that is new at every launch. The length moves the footprint, so
    // a word holding both would never leave the key, and the byte would make every launch a
    // new key; on a word of its own the byte leaves it as a step count does.
    let (run, log) = run_rounds("packed", "racy", "learn", 8, &[]);
    let measured = logged(&log, "measured", "footprint_packed");
    assert_eq!(measured, 2 + streamsan::model::footprint::learnt::IGNORED_AFTER as usize, "{log:?}");
    assert_eq!(race_counts(&run), vec![(write_then_read(), 8)]);
    assert_fixed_clean("packed", "learn", 8);
}

#[test]
fn measured_launches_run_on_a_patched_twin_and_every_other_on_the_programs_own_code() {
    // Every round: 300 launches of a learnt key, then a new key of that kernel and a kernel
    // never launched before, each measured; B reads what the new key wrote.
    let (run, log) = run_rounds("toggle", "racy", "learn", 8, &[]);
    // One twin, the only module patched: the program's own module never is.
    assert_eq!(counter(&run, " twins loaded"), 1, "{}", run.stderr());
    assert_eq!(log.iter().filter(|l| l.starts_with("patch ")).count(), 1, "{log:?}");
    // footprint_touch measured: round 1's 300 (nothing is learnt before the program first
    // synchronizes), its reader's key once, the new key of each round, and the checks of the
    // learnt keys at their 4th launch, once in each doubling to the 64th and once in each
    // quadrupling after: the writer's (the first key made, its phase 0) at 4, 8, 16, 32, 64,
    // 256 and 1024 (its 2101 launches after round 1's), the reader's (the second, its check
    // in the 8th to 11th launches at the 9th) at 4 only, in its 8. Every other launch ran the
    // program's code, and no launch ran patched without a table.
    let measured = 300 + 1 + 8 + 7 + 1;
    assert_eq!(logged(&log, "measured", "footprint_touch"), measured, "{}", run.stderr());
    assert_eq!(logged(&log, "native", "footprint_touch"), 8 * (300 + 2) - measured, "{log:?}");
    assert_eq!(log.iter().filter(|l| l.starts_with("patched ")).count(), 0, "{log:?}");
    for round in 0..8 {
        assert_eq!(logged(&log, "measured", &format!("footprint_fresh{round}")), 1, "{log:?}");
    }
    // Every round's race, found by the measured writer.
    assert_eq!(race_counts(&run), vec![(write_then_read(), 8)]);
    assert_fixed_clean("toggle", "learn", 8);
}

#[test]
fn a_twin_holds_its_modules_variables_as_the_program_left_them() {
    // footprint_counted adds one to its module's variable at each launch, measured on the
    // twin in round 1 (and for its reader's key), on the program's code after: the program
    // checks every round that its own copy counted every launch (the twin's copy taken in
    // before a launch on it and given back after), and the race is found by the measured
    // writer.
    // "stateful_legacy": the writer on the legacy NULL stream.
    for scenario in ["stateful", "stateful_legacy"] {
        let (run, log) = run_rounds(scenario, "racy", "learn", 3, &[]);
        assert_eq!(logged(&log, "measured", "footprint_counted"), 1, "{log:?}");
        assert_eq!(logged(&log, "native", "footprint_counted"), 2, "{log:?}");
        assert_eq!(counter(&run, " with their module's variables mirrored"), 1, "{}", run.stderr());
        // The writable variable copied into the twin and back by the engine's copier, the
        // constant into the twin by the driver.
        assert_eq!(variables_copied(&run), (3, 2, 1), "{}", run.stderr());
        assert_eq!(race_counts(&run), vec![(write_then_read(), 3)]);
        assert_fixed_clean(scenario, "learn", 3);
    }
}

#[test]
fn without_the_copier_the_driver_copies_every_variable_both_ways() {
    // The copier's code is the fifth module loaded (the program's three, then the writer's
    // twin): where the driver refuses it (PTX compilation turned off), the driver copies the
    // writable variable into the twin and back, and the program's count still holds.
    let fail = [("STANDIN_FAIL", "cuModuleLoadData:5:218".to_string())];
    let (run, log) = run_rounds("stateful", "racy", "learn", 3, &fail);
    assert_eq!(logged(&log, "measured", "footprint_counted"), 1, "{log:?}");
    assert_eq!(variables_copied(&run), (3, 0, 3), "{}", run.stderr());
    assert_eq!(race_counts(&run), vec![(write_then_read(), 3)]);
}

#[test]
fn no_twin_is_loaded_while_device_work_may_wait_for_the_host() {
    // Loading code may wait for the device to drain, which a stream waiting for the host
    // would never do: the writer launched behind a wait runs unmeasured, and the same write
    // once the host synchronized the context is measured and shows the race.
    let (run, log) = run_rounds("gated", "racy", "learn", 1, &[]);
    let touches: Vec<&str> =
        log.iter().filter(|l| l.ends_with(" footprint_touch")).map(|l| l.split(' ').next().unwrap_or("")).collect();
    assert_eq!(touches, ["native", "measured", "measured"], "{log:?}");
    assert_eq!(races(&run), vec![write_then_read()]);
    assert_eq!(races(&run_mode("gated", "fixed", "learn", &[])), vec![]);
}

#[test]
fn no_twin_is_loaded_while_a_stream_captures_in_global_mode() {
    // A load or an allocation would invalidate the program's capture: the first launch runs
    // unmeasured, the same launch after the capture is measured and shows the race.
    let (run, log) = run_rounds("capturing", "racy", "learn", 1, &[]);
    let touches: Vec<&str> =
        log.iter().filter(|l| l.ends_with(" footprint_touch")).map(|l| l.split(' ').next().unwrap_or("")).collect();
    assert_eq!(touches, ["native", "measured", "measured"], "{log:?}");
    assert_eq!(races(&run), vec![write_then_read()]);
    assert_eq!(races(&run_mode("capturing", "fixed", "learn", &[])), vec![]);
}

#[test]
fn a_twin_takes_the_attributes_the_program_gave_its_function() {
    // The writer asks for 64 KiB of dynamic shared memory, which only its function's
    // attribute allows: its twin must have it too, or the driver refuses the twin's launch.
    let (run, log) = run_rounds("big-shared", "racy", "learn", 1, &[]);
    assert_eq!(logged(&log, "measured", "footprint_beyond"), 1, "{log:?}");
    assert_eq!(counter(&run, " twin launches refused"), 0, "{}", run.stderr());
    assert_eq!(races(&run), vec![write_then_read()]);
    assert_eq!(races(&run_mode("big-shared", "fixed", "learn", &[])), vec![]);
}

#[test]
fn a_twin_launch_the_driver_refuses_is_made_as_the_program_made_it() {
    // The first launch (the writer's, on its twin) fails: the program's own launch is made,
    // the program runs on unchanged, and the note says why the writer was not measured.
    let fail = [("STANDIN_FAIL", "cuLaunchKernel:1:1".to_string())];
    let (run, log) = run_rounds("big-shared", "racy", "learn", 1, &fail);
    assert_eq!(logged(&log, "native", "footprint_beyond"), 1, "{log:?}");
    assert_eq!(counter(&run, " twin launches refused"), 1, "{}", run.stderr());
    let report = run.reports();
    assert!(report[0].notes.iter().any(|n| n.message.contains("refused")), "{:?}", report[0].notes);
}

#[test]
fn without_cufuncgetmodule_no_launch_finds_its_twin_and_the_note_says_so() {
    let fail = [("STANDIN_FAIL", "cuFuncGetModule:*:400".to_string())];
    let (run, log) = run_rounds("interior", "racy", "learn", 1, &fail);
    assert_eq!(log.iter().filter(|l| l.starts_with("measured ")).count(), 0, "{log:?}");
    let report = run.reports();
    assert!(
        report[0].notes.iter().any(|n| n.message.contains("could not be loaded a second time")),
        "{:?}",
        report[0].notes
    );
}

#[test]
fn learnt_footprints_find_every_race_exact_footprints_find() {
    // Each scenario, three rounds: learn measures some launches and applies what it learnt to
    // the others; every race exact mode finds, it finds as often, and its fixed twins are clean.
    for scenario in [
        "interior",
        "struct",
        "later",
        "out-of-order",
        "strided",
        "atomics",
        "neighbours",
        "between",
        "free",
        "overflow",
        "steps",
    ] {
        let (exact, _) = run_rounds(scenario, "racy", "exact", 3, &[]);
        let (learn, _) = run_rounds(scenario, "racy", "learn", 3, &[]);
        let (exact, learn) = (race_counts(&exact), race_counts(&learn));
        assert!(!exact.is_empty(), "{scenario}: exact finds its race");
        for (race, count) in &exact {
            let found = learn.iter().find(|(r, _)| r == race).map_or(0, |(_, c)| *c);
            assert!(found >= *count, "{scenario}: {race:?} found {count} times in exact, {found} in learn: {learn:?}");
        }
        assert_fixed_clean(scenario, "learn", 3);
    }
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

#[test]
fn kernels_on_two_branches_of_a_captured_graph_race_by_their_measured_footprints() {
    // Captured once, launched every round: in learn the first launch runs both kernel nodes
    // on their twins (footprint_args never launched outside the graph), the later ones the
    // program's own code, each node standing on what its measurement showed.
    let write_write = race("cross-stream-race", Some("WAW"), "write", "write");
    let (run, log) = run_rounds("graph", "racy", "learn", 3, &[]);
    assert_eq!(races(&run), vec![write_write.clone()], "{}", run.stderr());
    assert_eq!(race_counts(&run), vec![(write_write.clone(), 3)]);
    for kernel in ["footprint_args", "footprint_touch"] {
        assert_eq!(logged(&log, "measured", kernel), 1, "{log:?}");
        assert_eq!(logged(&log, "native", kernel), 2, "{log:?}");
    }
    assert_eq!(log.iter().filter(|l| l.starts_with("patched ")).count(), 0, "{log:?}");
    assert_fixed_clean("graph", "learn", 3);
    // Exact measures every launch; the parameters name two different bytes and miss it.
    let (run, log) = run_rounds("graph", "racy", "exact", 2, &[]);
    assert_eq!(races(&run), vec![write_write]);
    assert_eq!(logged(&log, "measured", "footprint_args"), 2, "{log:?}");
    assert_fixed_clean("graph", "exact", 2);
    assert_eq!(races(&run_mode("graph", "racy", "params", &[])), vec![]);
}

#[test]
fn a_kernel_in_two_nodes_of_a_built_graph_has_one_node_measured_a_launch() {
    // One table binds to a twin's function: the first launch measures the first node while
    // the second stands on its parameters (a pointer of unknown direction inside what the
    // first wrote), the second launch measures the other node, and with both measured the
    // race is found by the bytes both wrote.
    let guessed = race("cross-stream-race", Some("RAW"), "write", "read-or-write");
    let measured = race("cross-stream-race", Some("WAW"), "write", "write");
    assert_eq!(races(&run_mode("built", "racy", "learn", &[])), vec![guessed.clone()]);
    let (run, log) = run_rounds("built", "racy", "learn", 2, &[]);
    assert_eq!(races(&run), vec![guessed, measured], "{}", run.stderr());
    assert_eq!(logged(&log, "measured", "footprint_touch"), 2, "{log:?}");
    assert_eq!(logged(&log, "native", "footprint_touch"), 2, "{log:?}");
    assert_fixed_clean("built", "learn", 2);
}

#[test]
fn a_graph_node_whose_module_has_variables_is_measured_when_alone_in_its_module() {
    // The twin's copy of the variable is copied in before the whole graph and back after it:
    // the node runs on its twin (the program checks its copy counted every launch), as does
    // the other node, of another module.
    let (run, log) = run_rounds("built_stateful", "racy", "learn", 2, &[]);
    assert_eq!(logged(&log, "measured", "footprint_counted"), 1, "{log:?}");
    assert_eq!(logged(&log, "native", "footprint_counted"), 1, "{log:?}");
    assert_eq!(logged(&log, "measured", "footprint_touch"), 1, "{log:?}");
    assert!(!notes(&run).contains(&"footprint-unmeasured".to_string()), "{:?}", notes(&run));
    // In and out by the copier, and the constant in by the driver.
    assert_eq!(variables_copied(&run), (3, 2, 1), "{}", run.stderr());
    assert!(races(&run).contains(&race("cross-stream-race", Some("WAW"), "write", "write")), "{}", run.stderr());
    // Two nodes of the module: the other would meet the program's copy while the twin's
    // node counted in its own. Both run the program's code, with a note.
    let (run, log) = run_rounds("built_stateful_pair", "racy", "learn", 2, &[]);
    assert_eq!(logged(&log, "native", "footprint_counted"), 4, "{log:?}");
    assert!(notes(&run).contains(&"footprint-unmeasured".to_string()), "{:?}", notes(&run));
}

#[test]
fn no_graph_node_is_measured_while_a_stream_captures_in_global_mode() {
    // The first launch, while another stream captures, runs both nodes on the program's
    // code; the second measures one, the third the other.
    let (run, log) = run_rounds("built_capturing", "racy", "learn", 3, &[]);
    let touches: Vec<&str> =
        log.iter().filter(|l| l.ends_with(" footprint_touch")).map(|l| l.split(' ').next().unwrap_or("")).collect();
    assert_eq!(touches, ["native", "native", "measured", "native", "native", "measured"], "{log:?}");
    assert!(races(&run).contains(&race("cross-stream-race", Some("WAW"), "write", "write")));
}
