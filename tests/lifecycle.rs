//! No race is lost: a process that is killed, interrupted or crashes after a race leaves it
//! in its report, and dies as it would have without streamsan. Races are written as they are
//! found; the final report, written on the way out, also counts the synchronization the
//! program made after its race (two `cuCtxSynchronize` calls, where the report written at
//! the race counts one).

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use crate::common::*;

/// Starts `lifecycle sleep` under streamsan, waits for its race, sends `signal`.
fn killed_after_a_race(signal: i32) {
    let exe = lifecycle();
    let dir = scratch("killed");
    let mut child = with_default_interrupts(&mut Command::new(&exe))
        .arg("sleep")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}", dir.join("report.%p.json").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "raced\n");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = wait_bounded(&mut child);
    assert_eq!(status.signal(), Some(signal), "died of the signal, as without streamsan: {status:?}");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].1.races.len(), 1);
    assert_eq!(reports[0].1.races[0].kind, "cross-stream-race");
    assert_eq!(reports[0].1.intercepted.get("cuCtxSynchronize"), Some(&2), "the final report");
}

#[test]
fn sigterm_after_a_race_leaves_the_report() {
    killed_after_a_race(libc::SIGTERM);
}

#[test]
fn sigint_after_a_race_leaves_the_report() {
    killed_after_a_race(libc::SIGINT);
}

#[test]
fn a_fault_names_its_address_and_leaves_the_report() {
    let dir = scratch("fault");
    let out = output_bounded(
        streamsan(&dir)
            .args(["run", "--report"])
            .arg(dir.join("report.%p.json"))
            .arg("--")
            .arg(lifecycle())
            .arg("fault"),
    );
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("streamsan: the program received SIGSEGV (address 0x10)"), "{stderr}");
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 1, "{stderr}");
}

#[test]
fn a_crash_after_a_race_leaves_the_report() {
    let exe = lifecycle();
    let dir = scratch("crash");
    let out = output_bounded(
        streamsan(&dir).args(["run", "--report"]).arg(dir.join("report.%p.json")).arg("--").arg(&exe).arg("crash"),
    );
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "streamsan dies of the program's signal: {:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("streamsan: the program received SIGSEGV (sent by a process)"), "{stderr}");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 1, "{stderr}");
    assert_eq!(reports[0].1.races.len(), 1);
    assert_eq!(reports[0].1.intercepted.get("cuCtxSynchronize"), Some(&2), "the final report");
}

#[test]
fn a_race_in_a_library_constructor_before_streamsan_s_own_is_reported() {
    let mut flags = link_cuda();
    flags.extend(["-shared".into(), "-fPIC".into(), "-DRACE_AT_LOAD".into()]);
    let lib = compile_c_as("lifecycle", "librace_at_load.so", &flags.iter().map(String::as_str).collect::<Vec<_>>());
    let dir = lib.parent().unwrap().display().to_string();
    let mut flags = link_cuda();
    flags.extend([
        format!("-L{dir}"),
        format!("-Wl,-rpath,{dir}"),
        "-Wl,--no-as-needed".into(),
        "-lrace_at_load".into(),
    ]);
    let exe = compile_c_as("lifecycle", "lifecycle_linked", &flags.iter().map(String::as_str).collect::<Vec<_>>());
    let run = run(&exe, &["clean"]);
    run.assert_ran();
    let report = run.report();
    assert_eq!(report.races.len(), 1, "the constructor's race: {:?}", report.races);
    assert_eq!(report.races[0].kind, "cross-stream-race");
    // Found before the sink was installed, it was handed to it then: printed as any other.
    assert_eq!(run.stderr().matches("WARNING: streamsan: cross-stream-race").count(), 1, "{}", run.stderr());
}

/// `lifecycle mode` under `streamsan run`: it ran as it does alone (the same output), and
/// the run fails with the race it found before leaving without `exit`'s handlers.
fn left_after_a_race(mode: &str) -> Run {
    let exe = lifecycle();
    let alone = run_with(&exe, &[mode], RunOptions { native: true, ..Default::default() });
    let run = run(&exe, &[mode]);
    assert_eq!(run.stdout(), alone.stdout(), "{}", run.stderr());
    assert_eq!(alone.output.status.code(), Some(0));
    assert_eq!(run.output.status.code(), Some(66), "the run fails with the race: {}", run.stderr());
    run
}

#[test]
fn a_race_before_exit_without_its_handlers_is_on_the_disk() {
    let run = left_after_a_race("_exit");
    assert_eq!(run.report().races.len(), 1, "{}", run.stderr());
}

#[test]
fn a_race_before_quick_exit_is_on_the_disk() {
    let run = left_after_a_race("quick_exit");
    assert_eq!(run.report().races.len(), 1, "{}", run.stderr());
}

/// The image before the `exec` leaves its report at the path; the one after, with the
/// same pid, names its own apart rather than meeting that file.
#[test]
fn a_race_before_exec_is_on_the_disk_and_the_next_image_reports_apart() {
    for exec in ["exec", "execl", "execlp", "execle"] {
        the_next_image_reports_apart(exec);
    }
}

fn the_next_image_reports_apart(exec: &str) {
    let run = left_after_a_race(exec);
    let reports = reports_in(&run.dir, "report.");
    let names: Vec<String> =
        reports.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(reports.len(), 2, "{exec}: {names:?}\n{}", run.stderr());
    let (before, after) =
        if names[0].contains(".exec1.") { (&reports[1], &reports[0]) } else { (&reports[0], &reports[1]) };
    assert!(after.0.to_string_lossy().ends_with(".exec1.json"), "{names:?}");
    assert_eq!(before.1.races.len(), 1);
    assert_eq!(after.1.races.len(), 0, "the image after the exec ran the clean mode");
    assert!(!run.stderr().contains("already"), "{}", run.stderr());
}

/// Python's multiprocessing ends its forked workers with `os._exit`.
#[test]
fn races_in_forked_children_ending_without_exit_handlers_are_on_the_disk() {
    let exe = lifecycle();
    let run = run(&exe, &["forked_exit"]);
    assert_eq!(run.output.status.code(), Some(66), "{}", run.stderr());
    let reports = reports_in(&run.dir, "report.");
    let racy = reports.iter().filter(|(_, r)| r.races.len() == 1).count();
    assert_eq!(racy, 4, "one report with its race per child: {}", run.stderr());
    assert_eq!(run.stdout(), "child exited 66\n".repeat(4) + "done\n", "a child that found races ends as with exit(0)");
}
