//! Host races: `tests/scenarios/host_races.c`, a racy and a fixed twin per case,
//! run through the shim against the stand-in driver (whose copies to and from pinned memory
//! complete at the program's next wait). The racy twin must be reported as a `host-race`
//! with the host's access and the copy, the fixed twin must be clean, and both must print
//! what they print without streamsan.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;
use streamsan::harness::Streamsan;
use streamsan::report::text::describe_site;
use streamsan::report::text::missing_wait;
use streamsan::report::Report;

fn program() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let mut flags = link_cuda();
        flags.push("-lpthread".into());
        flags.push("-ldl".into());
        compile_c("host_races", &flags.iter().map(String::as_str).collect::<Vec<_>>())
    })
}

/// Runs a twin with the guard on (`host_races=1`, off by default), and any other options.
fn run_twin_with(scenario: &str, twin: &str, mut env: Vec<(&str, String)>) -> Run {
    match env.iter_mut().find(|(k, _)| *k == "STREAMSAN_OPTIONS") {
        Some((_, options)) if !options.contains("host_races") => *options = format!("host_races=1:{options}"),
        Some(_) => {}
        None => env.push(("STREAMSAN_OPTIONS", "host_races=1".to_string())),
    }
    let run = run_with(program(), &[scenario, twin], RunOptions { env: env.clone(), ..Default::default() });
    run.assert_ran();
    run.assert_reports_match_the_schema();
    let native = run_with(program(), &[scenario, twin], RunOptions { env, native: true });
    assert_eq!(native.stdout(), run.stdout(), "{scenario} {twin}: output changed\nstderr:\n{}", run.stderr());
    run
}

/// Host functions run when the program asks (from a thread of its own, as a driver's), so
/// that the host waits for one through its own flag, seen by no driver call.
fn run_twin(scenario: &str, twin: &str) -> Run {
    run_twin_with(scenario, twin, vec![("STANDIN_DEFER_CALLBACKS", "1".to_string())])
}

/// What the program's own table says its racy twin reports.
fn listed_kind(scenario: &str) -> String {
    let listed = run_with(program(), &["list"], RunOptions { native: true, ..Default::default() }).stdout();
    let line = listed.lines().find(|l| l.split(' ').next() == Some(scenario)).expect("listed scenario");
    line.split(' ').nth(1).unwrap().to_string()
}

fn races(report: &Report) -> Vec<(String, Option<String>, String)> {
    report.races.iter().map(|r| (r.kind.to_string(), r.hazard.map(|h| h.to_string()), missing_wait(r))).collect()
}

/// `report` holds one race: the host's read, in the scenario function `function`, of managed
/// memory that the measured kernel `footprint_indirect` wrote.
fn assert_read_after_footprint_indirect(report: &Report, function: &str) {
    let found = races(report);
    assert_eq!(found.len(), 1, "{found:?}");
    let race = report.races_of("host-race").next().unwrap_or_else(|| panic!("{found:?}"));
    assert!(race.hazard.is_some_and(|h| h == "RAW"), "{found:?}");
    assert_eq!(race.buffer.kind, "managed");
    assert_eq!(race.first.kernel.as_deref(), Some("footprint_indirect"));
    let site = describe_site(&race.second.site);
    assert!(site.ends_with(&format!("in {function}")), "{site}");
}

/// Runs both twins: the racy one must report a host race with `hazard`, its host access in
/// `function` of the program, its copy by `copy_api`; the fixed one nothing.
fn check(scenario: &str, hazard: &str, function: &str, copy_api: &str) -> Report {
    assert_eq!(listed_kind(scenario), "host-race", "the program's table disagrees for {scenario}");
    let racy = run_twin(scenario, "racy").report();
    let race = racy
        .races_of("host-race")
        .find(|r| r.hazard.is_some_and(|h| h == hazard))
        .unwrap_or_else(|| panic!("{scenario} racy: expected host-race {hazard}, got {:?}", races(&racy)));
    assert_eq!(race.second.api, "host");
    assert_eq!(race.second.stream.kind, "host");
    let access = if hazard == "RAW" { "read" } else { "write" };
    assert_eq!(race.second.access, access);
    let site = describe_site(&race.second.site);
    assert!(
        site.contains("host_races.c") && site.ends_with(&format!("in {function}")),
        "{scenario}: host access at {site}"
    );
    assert!(race.first.api.starts_with(copy_api), "{scenario}: the copy is {}", race.first.api);
    assert!(
        describe_site(&race.first.site).contains("host_races.c"),
        "{scenario}: copy at {}",
        describe_site(&race.first.site)
    );
    assert_eq!(race.missing_wait.action, "host-waits");
    let fixed = run_twin(scenario, "fixed").report();
    assert!(fixed.races.is_empty(), "{scenario} fixed: expected no race, got {:?}", races(&fixed));
    racy
}

/// Linux's number for SIGSEGV.
const SIGSEGV: i32 = 11;

const D2H: &str = "cuMemcpyDtoHAsync";
const H2D: &str = "cuMemcpyHtoDAsync";

#[test]
fn reading_the_destination_of_a_device_to_host_copy_before_synchronizing() {
    let racy = check("d2h_read", "RAW", "d2h_read", D2H);
    let race = &racy.races[0];
    let line = |site: &[streamsan::report::Frame]| {
        streamsan::report::frames::program_frame(site).and_then(|f| f.line).unwrap()
    };
    assert_eq!(line(&race.second.site), line(&race.first.site) + 1, "the read is on the line after the copy");
    assert_eq!(race.buffer.kind, "pinned-host");
    let range = race.first.range.as_ref().unwrap();
    assert_eq!(
        u64::from_str_radix(&range.end[2..], 16).unwrap() - u64::from_str_radix(&range.start[2..], 16).unwrap(),
        256
    );
    let read = u64::from_str_radix(&race.second.range.as_ref().unwrap().start[2..], 16).unwrap();
    assert_eq!(read, u64::from_str_radix(&range.start[2..], 16).unwrap() + 10, "the byte the host read");
}

#[test]
fn writing_the_destination_of_a_device_to_host_copy_before_synchronizing() {
    check("d2h_write", "WAW", "d2h_write", D2H);
}

/// A long copy is guarded on its first 16 pages and its last (`host_race_pages`, so that a
/// 12 MiB batch costs two short protections, not 3072 pages' worth): the host's reads of its
/// first and last bytes race, the read between them is seen only with every page guarded.
#[test]
fn a_long_copy_is_guarded_on_its_first_and_last_pages_unless_every_page_is_asked_for() {
    const LONG: u64 = 64 * 4096;
    let offsets = |report: &Report| {
        let start = |range: &Option<streamsan::report::ByteRange>| {
            u64::from_str_radix(&range.as_ref().unwrap().start[2..], 16).unwrap()
        };
        let mut read: Vec<u64> =
            report.races_of("host-race").map(|r| start(&r.second.range) - start(&r.first.range)).collect();
        read.sort_unstable();
        read
    };
    let racy = check("long_copy", "RAW", "long_copy", D2H);
    assert_eq!(offsets(&racy), [0, LONG - 1], "the first and the last page are guarded");
    let env =
        vec![("STREAMSAN_OPTIONS", "host_race_pages=0".to_string()), ("STANDIN_DEFER_CALLBACKS", "1".to_string())];
    let every = run_twin_with("long_copy", "racy", env).report();
    assert_eq!(offsets(&every), [0, LONG / 2, LONG - 1], "every page is guarded");
}

/// Work issued while a copy is guarded waits in the model's batch as it would without the
/// guard: the guard lifts what a synchronize joined without having every call tell the
/// batch first, since a program with a side-stream prefetcher always has a copy in flight
/// and telling each call on its own costs the program's thread on every step. So do copies
/// that the guard has nothing to do with: the 1000 device-to-device copies beside the
/// guarded one, and the 1000 copies to pageable memory that the host waits for once nothing
/// is in flight (each after a memset, which a copy told at once would tell first).
#[test]
fn work_beside_a_guarded_copy_waits_in_the_batch() {
    check("work_beside_copy", "RAW", "work_beside_copy", D2H);
    assert_the_batch_waits("work_beside_copy", "2000 memsets and 2000 copies");
}

/// Runs `scenario`'s fixed twin, clean, and checks that its program's thread told the
/// model's batch a few times only, for `work`.
fn assert_the_batch_waits(scenario: &str, work: &str) {
    let env = vec![("STREAMSAN_OPTIONS", "phase_times=1".to_string()), ("STANDIN_DEFER_CALLBACKS", "1".to_string())];
    let fixed = run_twin_with(scenario, "fixed", env);
    assert!(fixed.report().races.is_empty(), "{scenario}: the synchronize lifted the guard before the read");
    let told = phase_count(&fixed.stderr(), "batch told on program threads");
    assert!(told < 100, "{scenario}: the program's thread told the batch {told} times for {work}");
}

/// A guarded copy waits in the model's batch as a launch does: the program's thread does not
/// tell the batch at each one. Told at once, each would have the thread tell the work queued
/// before it, which a program whose small copies into pinned memory come between its
/// launches (Mask R-CNN) pays at every copy.
#[test]
fn guarded_copies_wait_in_the_batch() {
    check("copies_beside_work", "RAW", "copies_beside_work", D2H);
    assert_the_batch_waits("copies_beside_work", "1000 memsets and 1000 guarded copies");
}

/// A context's synchronize lifts the guards of the copies on its own streams before the
/// work queued ahead of it is told; a copy on another context's stream stays guarded.
#[test]
fn a_context_s_synchronize_orders_the_host_after_its_own_copies_only() {
    check("other_context", "RAW", "other_context", D2H);
}

/// Likewise a stream's synchronize, for the copies on that stream.
#[test]
fn a_stream_s_synchronize_orders_the_host_after_its_own_copies_only() {
    check("other_stream", "RAW", "other_stream", D2H);
}

#[test]
fn refilling_the_source_of_a_host_to_device_copy_in_flight() {
    check("h2d_refill", "WAR", "h2d_refill", H2D);
}

#[test]
fn reading_the_source_of_a_copy_in_flight_is_no_race_writing_it_is() {
    check("h2d_read_source", "WAR", "h2d_read_source", H2D);
}

#[test]
fn an_event_recorded_before_the_copy_does_not_order_it() {
    check("event_before_copy", "RAW", "event_before_copy", D2H);
}

#[test]
fn a_successful_stream_query_orders_the_host() {
    check("query", "RAW", "query", D2H);
}

#[test]
fn a_host_function_after_the_copy_orders_the_host() {
    check("host_function", "RAW", "host_function", D2H);
}

#[test]
fn registered_memory_is_guarded_too() {
    check("registered", "WAW", "registered", D2H);
}

/// The driver's own reads of a guarded page inside a call (small copies' pinned sources, read
/// on the CPU as a GPU's driver reads them: `STANDIN_INLINE_COPIES`) are the calls', which
/// the model judges: no host race. The page is guarded again once a call returns: the
/// synchronous copy's source shares the page of the copy in flight and guards nothing of
/// its own, and the host's read after it, before the synchronize, still races.
#[test]
fn the_driver_s_own_access_inside_a_call_is_no_host_race() {
    let env = || vec![("STANDIN_DEFER_CALLBACKS", "1".to_string()), ("STANDIN_INLINE_COPIES", "1".to_string())];
    assert_eq!(listed_kind("driver_reads_source"), "host-race");
    let racy = run_twin_with("driver_reads_source", "racy", env());
    assert!(racy.stdout().ends_with("pages shared 1\n"), "{}", racy.stdout());
    let report = racy.report();
    let kinds: Vec<_> = report.races.iter().map(|r| (r.kind.to_string(), r.second.api.clone())).collect();
    assert_eq!(kinds, [("host-race".to_string(), "host".to_string())], "{:?}", races(&report));
    let site = describe_site(&report.races[0].second.site);
    assert!(site.contains("host_races.c") && site.ends_with("in driver_reads_source"), "{site}");
    let fixed = run_twin_with("driver_reads_source", "fixed", env()).report();
    assert!(fixed.races.is_empty() && no_notes_but_footprints(&fixed), "{:?} {:?}", races(&fixed), fixed.notes);
}

#[test]
fn another_thread_touching_the_destination_races_unless_started_after_the_synchronize() {
    let racy = check("other_thread", "RAW", "reader", D2H);
    let race = &racy.races[0];
    assert_ne!(race.second.thread.id, race.first.thread.id, "the reading thread is named, not the copying one");
}

#[test]
fn a_race_just_before_exit_is_in_the_report() {
    check("exit_after", "RAW", "exit_after", D2H);
}

/// The host's store is let through and the page guarded again: nothing given up.
#[test]
fn other_data_on_a_guarded_page_is_no_race() {
    assert_eq!(listed_kind("shared_page"), "none");
    for twin in ["racy", "fixed"] {
        let report = run_twin("shared_page", twin).report();
        assert!(
            report.races.is_empty() && no_notes_but_footprints(&report),
            "{twin}: {:?} {:?}",
            races(&report),
            report.notes
        );
    }
}

/// CuSan's `34_negative_array`: a managed table of pointers and the buffer it names share a
/// page. The host's read of the table's entry the kernel does not use is no race, and the
/// page is guarded again after it: its read of the buffer the kernel writes, before the
/// synchronize, is a race (found once the kernel's measured footprint is read).
#[test]
fn other_data_on_a_guarded_page_leaves_the_page_guarded() {
    let env = || vec![("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string())];
    assert_eq!(listed_kind("managed_shared_page"), "host-race");
    let racy = run_twin_with("managed_shared_page", "racy", env()).report();
    assert_read_after_footprint_indirect(&racy, "shared_managed_page");
    assert!(no_notes_but_footprints(&racy), "nothing given up: {:?}", racy.notes);
    let fixed = run_twin_with("managed_shared_page", "fixed", env()).report();
    assert!(fixed.races.is_empty(), "{:?}", races(&fixed));
}

/// A loop over a table beside guarded bytes is let through a bounded number of times, then
/// its page is left open until its guard changes, and a note says so.
#[test]
fn a_page_touched_beside_its_guarded_bytes_over_and_over_is_given_up() {
    let env = || vec![("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string())];
    assert_eq!(listed_kind("managed_table_loop"), "none");
    let racy = run_twin_with("managed_table_loop", "racy", env()).report();
    assert!(racy.races.is_empty(), "{:?}", races(&racy));
    let note = racy.notes.iter().find(|n| n.kind == "host-guard-gave-up").expect("a note that the guard gave up");
    assert_eq!(note.api, "cuLaunchKernel");
    let fixed = run_twin_with("managed_table_loop", "fixed", env()).report();
    assert!(fixed.races.is_empty() && no_notes_but_footprints(&fixed), "{:?} {:?}", races(&fixed), fixed.notes);
}

/// The C library's calls that copy between files or sockets and memory, racy twin reported,
/// and every twin's output (each call's return value) the native one: a guarded page would
/// make the kernel refuse the call (`EFAULT`).
#[test]
fn calls_that_copy_into_or_out_of_a_copy_in_flight_race_and_still_succeed() {
    let listed = run_with(program(), &["list"], RunOptions { native: true, ..Default::default() }).stdout();
    let calls: Vec<&str> = listed.lines().filter_map(|l| l.strip_prefix("io_")?.split(' ').next()).collect();
    let into = ["read", "__read_chk", "pread", "readv", "preadv", "recv", "recvfrom", "recvmsg", "fread"];
    let out_of = ["write", "pwrite", "writev", "pwritev", "send", "sendto", "sendmsg", "fwrite"];
    assert_eq!(calls.len(), into.len() + out_of.len() + 2, "{calls:?}");
    for call in into.iter().chain(&out_of) {
        let hazard = if out_of.contains(call) { "RAW" } else { "WAW" };
        let racy = check(&format!("io_{call}"), hazard, "transfer", D2H);
        let race = &racy.races[0];
        // The call's bytes inside the copy's: all 256 of them.
        let range = race.second.range.as_ref().unwrap();
        let (start, end) = (&range.start[2..], &range.end[2..]);
        let width = u64::from_str_radix(end, 16).unwrap() - u64::from_str_radix(start, 16).unwrap();
        assert_eq!(width, 256, "{call}: the host's access {range:?}");
        let run = run_twin(&format!("io_{call}"), "racy");
        assert!(run.stdout().starts_with(&format!("{call} returned 8192,")), "{call}: {}", run.stdout());
    }
}

#[test]
fn a_file_read_refilling_the_source_of_a_copy_in_flight_races() {
    check("io_refill", "WAR", "io_refill", H2D);
    assert!(run_twin("io_refill", "racy").stdout().starts_with("read returned 8192,"));
}

#[test]
fn a_read_into_other_data_on_a_guarded_page_is_no_race_and_succeeds() {
    assert_eq!(listed_kind("io_shared_page"), "none");
    let run = run_twin("io_shared_page", "racy");
    let report = run.report();
    assert!(report.races.is_empty(), "{:?}", races(&report));
    assert!(report.notes.iter().any(|n| n.kind == "host-guard-gave-up"), "{:?}", report.notes);
    assert!(run.stdout().starts_with("read returned 32,"), "{}", run.stdout());
}

#[test]
fn asynchronous_copies_into_pageable_memory_are_not_guarded() {
    assert_eq!(listed_kind("pageable"), "none");
    for twin in ["racy", "fixed"] {
        let report = run_twin("pageable", twin).report();
        assert!(report.races.is_empty(), "{twin}: {:?}", races(&report));
    }
}

#[test]
fn the_programs_own_segv_handler_still_runs_for_its_own_faults() {
    let racy = check("own_segv_handler", "RAW", "d2h_read", D2H);
    assert!(!racy.races.is_empty());
    for twin in ["racy", "fixed"] {
        let run = run_twin("own_segv_handler", twin);
        assert!(run.stdout().contains("handler in place: yes\nown fault handled\n"), "{twin}: {}", run.stdout());
    }
}

#[test]
fn a_child_forked_with_a_copy_in_flight_runs_as_without_streamsan() {
    check("fork_child", "RAW", "fork_child", D2H);
    let run = run_twin("fork_child", "racy");
    assert!(run.stdout().starts_with("child ran\n"), "{}", run.stdout());
}

#[test]
fn a_fault_that_is_not_the_guards_ends_the_program_as_without_streamsan() {
    let native = run_with(program(), &["own_crash", "racy"], RunOptions { native: true, ..Default::default() });
    let env = vec![("STREAMSAN_OPTIONS", "host_races=1".to_string())];
    let run = run_with(program(), &["own_crash", "racy"], RunOptions { env, ..Default::default() });
    assert_eq!(native.output.status.signal(), Some(SIGSEGV), "{:?}", native.output.status);
    assert_eq!(run.output.status.signal(), Some(SIGSEGV), "{:?}\n{}", run.output.status, run.stderr());
    assert_eq!(run.stdout(), native.stdout());
}

#[test]
fn the_guard_is_off_unless_asked_for() {
    let run = run_with(program(), &["d2h_read", "racy"], RunOptions::default());
    run.assert_ran();
    let report = run.report();
    assert!(report.races.is_empty(), "{:?}", races(&report));
}

#[test]
fn host_races_0_turns_the_guard_off() {
    let env = vec![("STREAMSAN_OPTIONS", "host_races=0".to_string())];
    let racy = run_twin_with("d2h_read", "racy", env).report();
    assert!(racy.races.is_empty(), "{:?}", races(&racy));
}

#[test]
fn host_races_are_printed_suppressed_and_asserted_on_like_the_others() {
    let run = run_twin("d2h_write", "racy");
    let stderr = run.stderr();
    assert!(stderr.contains("WARNING: streamsan: host-race (WAW) on buffer"), "{stderr}");
    assert!(stderr.contains("  Write of [") && stderr.contains(") by the host, thread T1:"), "{stderr}");
    assert!(stderr.contains("Missing wait: make the host wait for stream"), "{stderr}");

    let dir = scratch("host-race-suppressions");
    let file = dir.join("host.supp");
    std::fs::write(&file, "host-race:d2h_write\n").unwrap();
    let env = vec![("STREAMSAN_OPTIONS", format!("suppressions={}", file.display()))];
    let suppressed = run_twin_with("d2h_write", "racy", env).report();
    assert!(suppressed.races.is_empty() && suppressed.summary.suppressed == 1, "{:?}", suppressed.summary);

    let mut program = Command::new(self::program());
    program.args(["d2h_write", "racy"]).env("LD_LIBRARY_PATH", driver_dir());
    let harnessed =
        Streamsan::with_shim(shim()).option("host_races", "1").unwrap().run(program).expect("run under streamsan");
    assert_eq!(harnessed.races().kind("host-race").at("host_races.c").count(), 1, "{}", harnessed.races().describe());
}

/// Managed memory: the host reading what a kernel writes before it synchronized with the
/// kernel's stream (or only with another stream), writing what a kernel reads before a query
/// said the kernel is done, reading what a memset writes.
#[test]
fn the_host_touching_managed_memory_a_kernel_or_memset_uses_races() {
    for (scenario, hazard, api) in [
        ("managed_kernel", "RAW", "cuLaunchKernel"),
        ("managed_other_stream", "RAW", "cuLaunchKernel"),
        ("managed_input", "WAR", "cuLaunchKernel"),
        ("managed_memset", "RAW", "cuMemsetD8Async"),
    ] {
        let racy = check(scenario, hazard, scenario, api);
        let race = racy.races_of("host-race").next().unwrap();
        assert_eq!(race.buffer.kind, "managed", "{scenario}");
        if api == "cuLaunchKernel" {
            assert_eq!(race.first.kernel.as_deref(), Some("scale(float*, float const*, int)"), "{scenario}");
        }
    }
}

/// A kernel being measured (its first launch, told to the model at once) guards what it
/// uses as one told in the batch does.
#[test]
fn a_measured_launch_guards_the_managed_memory_it_uses() {
    let env = vec![
        ("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string()),
        ("STREAMSAN_FOOTPRINT_TRACE", "counters".to_string()),
    ];
    let run = run_twin_with("managed_kernel", "racy", env);
    assert!(run.stderr().contains("1 launches measured"), "{}", run.stderr());
    let report = run.report();
    let race = report.races_of("host-race").next().unwrap_or_else(|| panic!("{:?}", races(&report)));
    assert_eq!(race.first.api, "cuLaunchKernel");
}

/// A measured kernel that reaches managed memory only through a table of pointers in
/// managed memory: the other managed buffers are guarded until its footprint is read, and
/// the host's read of what it wrote is a race, its read of a buffer it never touched none.
#[test]
fn a_measured_launch_s_footprint_decides_the_host_s_accesses_beyond_its_parameters() {
    let env = || vec![("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string())];
    let racy = run_twin_with("managed_table", "racy", env()).report();
    assert_read_after_footprint_indirect(&racy, "managed_table");
    let fixed = run_twin_with("managed_table", "fixed", env()).report();
    assert!(fixed.races.is_empty(), "{:#?}", fixed.races);
}

/// Pinned memory a kernel uses through its own address (zero-copy), as managed memory.
#[test]
fn the_host_reading_pinned_memory_a_kernel_writes_races() {
    let racy = check("mapped_kernel", "RAW", "mapped_kernel", "cuLaunchKernel");
    assert_eq!(racy.races_of("host-race").next().unwrap().buffer.kind, "pinned-host");
}

/// A kernel polls a flag in pinned memory through a volatile load (XLA's `DelayKernel`) and
/// the host sets it while the kernel runs: that is how they talk, no race. The host writing
/// what a kernel reads with a plain load is one. Both kernels are `extern "C"`: their PTX
/// alone tells the loads apart.
#[test]
fn a_flag_a_kernel_polls_is_no_race_a_buffer_it_reads_plainly_is() {
    check("polled_flag", "WAW", "polled_flag", "cuLaunchKernel");
    // Measured (a first launch, told to the model at once), the same.
    let env = || vec![("STREAMSAN_SANITIZER_LIB", standin_sanitizer().display().to_string())];
    let racy = run_twin_with("polled_flag", "racy", env()).report();
    assert_eq!(racy.races_of("host-race").count(), 1, "{:?}", races(&racy));
    let fixed = run_twin_with("polled_flag", "fixed", env()).report();
    assert!(fixed.races.is_empty(), "{:?}", races(&fixed));
}
