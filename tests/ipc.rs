//! Races across processes that share memory and events through CUDA IPC
//! (`docs/semantics.md#ipc`): `tests/scenarios/ipc.c`, a parent and the child it forked, each
//! with its own report.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use streamsan::report::{RaceReport, Report};

use super::common::*;

fn ipc() -> PathBuf {
    compile_c("ipc", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>())
}

/// `ipc mode` under `streamsan run`: the run's reports, the parent's first.
fn reports_of(mode: &str) -> (Run, Vec<Report>) {
    let run = run(&ipc(), &[mode]);
    run.assert_ran();
    run.assert_reports_match_the_schema();
    assert_eq!(run.stdout(), "done\n", "{}", run.stderr());
    let mut reports = run.reports();
    assert_eq!(reports.len(), 2, "a report per process: {}", run.stderr());
    // The parent forked the child: the lower pid, but for a wrap of the pid counter.
    let child_first = reports[1].pid < reports[0].pid && reports[0].pid - reports[1].pid < 1 << 20;
    if reports[0].command == reports[1].command && child_first {
        reports.swap(0, 1);
    }
    (run, reports)
}

/// The one race of `report`, and that the other report has none.
fn the_race(report: &Report, other: &Report, stderr: &str) -> RaceReport {
    assert_eq!(other.races.len(), 0, "{:?}\n{stderr}", other.races);
    assert_eq!(report.races.len(), 1, "{stderr}");
    report.races[0].clone()
}

fn in_function(race_side: &streamsan::report::OpReport, function: &str) -> bool {
    race_side.site.iter().any(|f| f.function.as_deref() == Some(function))
}

/// The child reads what the parent wrote without waiting on the event the parent recorded
/// after the write: the child reports it, naming both processes, streams and call sites.
#[test]
fn a_read_in_another_process_without_the_ipc_event_is_a_race_naming_both() {
    let (run, reports) = reports_of("racy");
    let (parent, child) = (&reports[0], &reports[1]);
    let race = the_race(child, parent, &run.stderr());
    assert_eq!((race.kind.as_str(), race.hazard.map(|h| h.to_string())), ("cross-stream-race", Some("RAW".into())));
    assert_eq!((race.first.pid, race.second.pid), (Some(parent.pid), Some(child.pid)));
    assert_eq!((race.first.api.as_str(), race.second.api.as_str()), ("cuMemsetD8Async", "cuMemcpyDtoDAsync_v2"));
    assert!(in_function(&race.first, "producer"), "the parent's call site, resolved here: {:?}", race.first.site);
    assert!(in_function(&race.second, "consumer"), "{:?}", race.second.site);
    assert_eq!(race.first.stream.kind, "non-blocking");
    assert_eq!(race.missing_wait.action.to_string(), "ipc-event");
    let text = run.stderr();
    let wait = format!("in process {} after cuMemsetD8Async at ipc.c:", parent.pid);
    assert!(text.contains(&wait) && text.contains(&format!("in process {} before", child.pid)), "{text}");
    assert!(!child.notes.iter().any(|n| n.kind == "ipc-import"), "the exporter ran under streamsan");
}

/// A pool's allocation shared through its export data is shared memory as well.
#[test]
fn a_pool_pointer_imported_in_another_process_is_shared_memory() {
    let (run, reports) = reports_of("pool");
    let (parent, child) = (&reports[0], &reports[1]);
    let race = the_race(child, parent, &run.stderr());
    assert_eq!((race.first.pid, race.second.pid), (Some(parent.pid), Some(child.pid)));
    assert_eq!(race.buffer.kind, "imported");
}

/// Waiting on the opened IPC event orders the read after the write.
#[test]
fn a_wait_on_the_opened_ipc_event_orders_the_read() {
    let (run, reports) = reports_of("fixed");
    assert!(reports.iter().all(|r| r.races.is_empty()), "{}", run.stderr());
    assert!(reports.iter().all(|r| r.notes.iter().all(|n| n.kind != "ipc-import")), "{:?}", reports);
}

/// A parent that synchronized with its write before handing the handle on needs no event.
#[test]
fn a_write_the_exporter_synchronized_with_before_sending_needs_no_event() {
    let (run, reports) = reports_of("synced");
    assert!(reports.iter().all(|r| r.races.is_empty()), "{}", run.stderr());
}

/// The parent writes again while the child's read may still run: the parent completes the
/// race, and reports it with the child's read first.
#[test]
fn a_write_after_another_process_s_read_without_waiting_is_reported_by_the_writer() {
    let (run, reports) = reports_of("overwrite");
    let (parent, child) = (&reports[0], &reports[1]);
    let race = the_race(parent, child, &run.stderr());
    assert_eq!(race.hazard.map(|h| h.to_string()), Some("WAR".into()));
    assert_eq!((race.first.pid, race.second.pid), (Some(child.pid), Some(parent.pid)));
    assert_eq!(race.first.api, "cuMemcpyDtoDAsync_v2");
    assert!(in_function(&race.first, "consumer"), "{:?}", race.first.site);
}

/// The parent waits on the IPC event the child recorded after its read before it writes
/// again: an event exported by the opening process orders the exporter.
#[test]
fn a_write_after_waiting_on_the_reader_s_ipc_event_is_ordered() {
    let (run, reports) = reports_of("answered");
    assert!(reports.iter().all(|r| r.races.is_empty()), "{}", run.stderr());
}

/// Handles no process of the run exported: each opening call site is noted once (counted),
/// and the opened memory is a buffer as any other.
#[test]
fn handles_no_process_of_the_run_exported_are_noted_once_per_call_site() {
    let run = run(&ipc(), &["unseen"]);
    run.assert_ran();
    let report = run.report();
    let notes: Vec<_> = report.notes.iter().filter(|n| n.kind == "ipc-import").collect();
    let apis: Vec<_> = notes.iter().map(|n| (n.api.as_str(), n.count)).collect();
    assert_eq!(apis, [("cuIpcOpenMemHandle_v2", 2), ("cuIpcOpenEventHandle", 2)], "{:?}", report.notes);
    assert!(report.races.is_empty());
}

/// `ipc mode` preloaded by hand (no `streamsan run`), its temporary directory `tmp`, with
/// `env` besides; the reports go into `dir`.
fn preloaded(mode: &str, dir: &Path, tmp: &Path, env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(ipc());
    cmd.arg(mode)
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}", dir.join("report.%p.json").display()))
        .env("TMPDIR", tmp)
        .env_remove("STREAMSAN_RUN")
        .env_remove("STREAMSAN_PEERS");
    for (name, value) in env {
        cmd.env(name, value);
    }
    output_bounded(&mut cmd)
}

/// Without the wrapper, the first preloaded process names a directory for its tree: made
/// 0700, each process's file 0600, and the child's race found through it.
#[test]
fn a_process_tree_preloaded_by_hand_shares_through_a_private_directory() {
    let dir = scratch("ipc-preloaded");
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = preloaded("racy", &dir, &tmp, &[]);
    assert_eq!(text(&out.stdout), "done\n", "{}", text(&out.stderr));
    let races: usize = reports_in(&dir, "report.").iter().map(|(_, r)| r.races.len()).sum();
    assert_eq!(races, 1, "{}", text(&out.stderr));
    let peers: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(peers.len(), 1, "one directory for the tree: {peers:?}");
    assert!(peers[0].file_name().unwrap().to_string_lossy().starts_with("streamsan-peers."));
    assert_eq!(std::fs::metadata(&peers[0]).unwrap().permissions().mode() & 0o777, 0o700);
    for file in std::fs::read_dir(&peers[0]).unwrap() {
        assert_eq!(file.unwrap().metadata().unwrap().mode() & 0o777, 0o600);
    }
}

/// A directory others may enter (another user's, or one made carelessly) is never used: the
/// processes share nothing, and the child's opening is noted as from a process not seen.
#[test]
fn a_directory_others_can_enter_is_not_used() {
    let dir = scratch("ipc-open-directory");
    let peers = dir.join("peers");
    std::fs::create_dir(&peers).unwrap();
    std::fs::set_permissions(&peers, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = preloaded("racy", &dir, &dir, &[("STREAMSAN_PEERS", &peers)]);
    assert_eq!(text(&out.stdout), "done\n", "{}", text(&out.stderr));
    let reports = reports_in(&dir, "report.");
    assert!(reports.iter().all(|(_, r)| r.races.is_empty()), "{}", text(&out.stderr));
    let unseen = reports.iter().flat_map(|(_, r)| &r.notes).filter(|n| n.kind == "ipc-import").count();
    assert_eq!(unseen, 2, "the child's memory and event, opened unseen");
    assert_eq!(std::fs::read_dir(&peers).unwrap().count(), 0, "nothing written there");
}

/// Under `streamsan run` the directory lies beside the run's list, and goes with it.
#[test]
fn the_run_s_directory_is_removed_with_its_list() {
    let tmp = scratch("ipc-run-tmp");
    let env = vec![("TMPDIR", tmp.display().to_string())];
    let run = run_with(&ipc(), &["racy"], RunOptions { env, ..Default::default() });
    assert_eq!(run.output.status.code(), Some(66), "{}", run.stderr());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}
