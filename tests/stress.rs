//! Many threads at once: 16 host threads with 16 streams each, 100,000 launches, copies,
//! memsets, events, synchronizations, frees and allocations under the stand-in
//! (`tests/scenarios/stress.c`). No deadlock (the run must end within a deadline), no crash,
//! and the same races as the same sequences run one thread after another.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use streamsan::report::text::describe_site;
use streamsan::report::Report;

/// Runs `stress MODE` under streamsan; fails if it takes more than two minutes.
fn stress(mode: &str) -> Report {
    let exe = compile_c(
        "stress",
        &[link_cuda(), vec!["-lpthread".into()]].concat().iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let dir = scratch(&format!("stress-{mode}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_streamsan"))
        .args(["run", "--quiet", "--report"])
        .arg(dir.join("report.%p.json"))
        .arg("--")
        .arg(&exe)
        .arg(mode)
        .env("STREAMSAN_SHIM", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env_remove("STANDIN_LOG")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("stress {mode}: no end after two minutes (a deadlock?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(matches!(status.code(), Some(0 | 66)), "stress {mode}: {status:?}");
    reports_in(&dir, "report.").into_iter().next().expect("a report").1
}

/// The races as (kind, hazard, first site, second site) -> occurrences.
fn verdicts(report: &Report) -> BTreeMap<String, u64> {
    report
        .races
        .iter()
        .map(|r| {
            let key = format!(
                "{} {:?} {} -> {}",
                r.kind,
                r.hazard,
                describe_site(&r.first.site),
                describe_site(&r.second.site)
            );
            (key, r.count)
        })
        .collect()
}

#[test]
fn sixteen_threads_at_once_find_what_they_find_one_after_another() {
    let concurrent = stress("concurrent");
    let serial = stress("serial");
    let (c, s) = (verdicts(&concurrent), verdicts(&serial));
    assert!(!s.is_empty(), "the sequences race somewhere");
    assert_eq!(c, s, "concurrent and serial verdicts differ");
    assert_eq!(concurrent.intercepted, serial.intercepted, "every call seen, either way");
}

/// With `--halt-on-error`, threads that find races at once halt the program at one race: one
/// printed, one in the report.
#[test]
fn halting_among_many_threads_stops_at_one_race() {
    let exe = compile_c(
        "stress",
        &[link_cuda(), vec!["-lpthread".into()]].concat().iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let dir = scratch("stress-halt");
    let out = streamsan(&dir)
        .env_remove("STANDIN_LOG")
        .args(["run", "--halt-on-error", "--report"])
        .arg(dir.join("report.%p.json"))
        .arg("--")
        .arg(&exe)
        .arg("concurrent")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(66), "{stderr}");
    assert_eq!(stderr.matches("WARNING: streamsan:").count(), 1, "{stderr}");
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 1);
}
