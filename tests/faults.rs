//! Faults: a full disk (`tests/scenarios/faultfs.c`), a report folder that vanishes, signals
//! at each point of a report's life (`tests/scenarios/faults.c`), a killed wrapper, a closed
//! pipe. Whatever happens, no race is lost, no report file is half written, the program dies
//! as it would without streamsan, and the summary and exit status say what happened.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::common::*;
use streamsan::report::Report;

/// `tests/scenarios/faults.c`, built.
fn faults() -> PathBuf {
    compile_c("faults", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>())
}

/// The full disk, built.
fn faultfs() -> PathBuf {
    compile_c_as("faultfs", "libfaultfs.so", &["-shared", "-fPIC"])
}

/// `program args` with the shim preloaded by hand, its report in `dir`.
fn preloaded(dir: &Path, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}", report_arg(dir)))
        .env_remove("STREAMSAN_RUN");
    cmd
}

/// `streamsan run --report DIR/report.%p.json -- program args` on a disk with `space`
/// bytes free in `dir`.
fn run_on_full_disk(dir: &Path, space: usize, program: &Path, args: &[&str]) -> Output {
    streamsan(dir)
        .args(["run", "--report", &report_arg(dir), "--"])
        .arg(program)
        .args(args)
        .env("LD_PRELOAD", faultfs())
        .env("FAULTFS_DIR", dir)
        .env("FAULTFS_SPACE", space.to_string())
        .output()
        .unwrap()
}

/// Every file streamsan left in `dir` is a whole report (no truncated JSON, no temporary).
fn assert_only_whole_reports(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("report.") {
            Report::read_from(&path).unwrap_or_else(|e| panic!("{name} is not a whole report: {e}"));
        }
        assert!(!name.ends_with(".tmp"), "a temporary file is left: {name}");
    }
}

/// The report streamsan printed on stderr because it could not write it.
fn report_on_stderr(stderr: &str) -> serde_json::Value {
    let at = stderr.find("streamsan: the report (").unwrap_or_else(|| panic!("no report on stderr:\n{stderr}"));
    let json = &stderr[at..];
    let json = &json[json.find('{').unwrap()..];
    let end = json.find("\n}\n").expect("the report's end") + 2;
    serde_json::from_str(&json[..end]).expect("a whole JSON report on stderr")
}

/// Reads the line the program prints once it has found its races.
fn wait_for_races(child: &mut Child) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "raced\n");
}

fn send(pid: u32, signal: i32) {
    // SAFETY: signalling a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

// ---- the run's exit status and summary -----------------------------------------------------

#[test]
fn races_in_a_child_fail_the_run_whose_parent_exits_0() {
    let dir = scratch("child-races");
    let out = streamsan(&dir)
        .args(["run", "--report", &report_arg(&dir), "--", "sh", "-c", "\"$0\" races; true"])
        .arg(lifecycle())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(66),
        "a launcher that swallows the worker's status does not pass the run:\n{stderr}"
    );
    assert!(stderr.contains("streamsan: 2 races (1 cross-stream-race, 1 use-before-alloc) in 1 report"), "{stderr}");
}

#[test]
fn a_full_disk_at_the_first_write_leaves_no_invalid_report_and_is_an_error() {
    let dir = scratch("disk-full");
    let out = run_on_full_disk(&dir, 300, &lifecycle(), &["races"]);
    let stderr = text(&out.stderr);
    assert_only_whole_reports(&dir);
    assert!(stderr.contains("streamsan: error: cannot write the report to"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains("its 2 races went to the program's stderr"), "{stderr}");
    assert_eq!(report_on_stderr(&stderr)["races"].as_array().unwrap().len(), 2);
    assert_eq!(out.status.code(), Some(66), "{stderr}");
}

#[test]
fn a_disk_that_fills_up_keeps_the_last_whole_report_and_the_summary_says_it_is_old() {
    // The size of a report of one race: the run stopped at its first race.
    let dir = scratch("disk-one");
    streamsan(&dir)
        .args(["run", "--quiet", "--halt-on-error", "--report", &report_arg(&dir), "--"])
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    let one_race = std::fs::metadata(&reports_in(&dir, "report.")[0].0).unwrap().len() as usize;
    // Room for it, not for the report of two.
    let dir = scratch("disk-fills");
    let out = run_on_full_disk(&dir, one_race + one_race / 2, &lifecycle(), &["races"]);
    let stderr = text(&out.stderr);
    assert_only_whole_reports(&dir);
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 1, "{stderr}");
    assert_eq!(reports[0].1.races.len(), 1, "the last version that could be written, whole");
    assert!(stderr.contains("the file there is an older version"), "{stderr}");
    assert!(stderr.contains("its 2 races went to the program's stderr"), "{stderr}");
    assert!(!stderr.contains("in 1 report"), "the old file is not summarized as the run's report:\n{stderr}");
    assert_eq!(out.status.code(), Some(66));
}

#[test]
fn a_report_path_that_cannot_be_written_once_running_is_an_error_in_the_summary() {
    // The path passes the check before the run, then the program itself takes it (a
    // directory where its pid-named report goes).
    let dir = scratch("taken-at-runtime");
    let script = format!("mkdir {}/report.$$.json && exec \"$0\" races", dir.display());
    let out = streamsan(&dir)
        .args(["run", "--report", &report_arg(&dir), "--", "sh", "-c", &script])
        .arg(lifecycle())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(stderr.contains("streamsan: error: cannot write the report to"), "{stderr}");
    assert!(stderr.contains("its 2 races went to the program's stderr"), "{stderr}");
    assert!(!stderr.contains("made no CUDA driver call"), "{stderr}");
    assert_eq!(report_on_stderr(&stderr)["races"].as_array().unwrap().len(), 2);
    assert_eq!(out.status.code(), Some(66));
    // `--quiet` hides all but errors: this one stays.
    let dir = scratch("taken-at-runtime-quiet");
    let script = format!("mkdir {}/report.$$.json && exec \"$0\" races", dir.display());
    let out = streamsan(&dir)
        .args(["run", "--quiet", "--report", &report_arg(&dir), "--", "sh", "-c", &script])
        .arg(lifecycle())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(stderr.contains("streamsan: error: cannot write the report to"), "{stderr}");
    assert_eq!(out.status.code(), Some(66));
}

// ---- the cost of a race --------------------------------------------------------------------

#[test]
fn a_race_costs_the_same_however_many_races_came_before() {
    // 256 races: the report is not rewritten at each (which made the n-th race cost n),
    // only when the races found have doubled: 1, 2, 4, ... 256, and at exit.
    let dir = scratch("many-races");
    let log = scratch("many-races-log").join("replacements");
    let out = preloaded(&dir, &faults(), &["256", "exit"])
        .env("LD_PRELOAD", format!("{}:{}", shim().display(), faultfs().display()))
        .env("FAULTFS_DIR", &dir)
        .env("FAULTFS_LOG", &log)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66));
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports[0].1.races.len(), 256, "every race in the report");
    let replacements = std::fs::read_to_string(&log).unwrap().lines().filter(|l| l.contains(" report.")).count();
    assert!(replacements <= 2 * 9 + 2, "the report was written {replacements} times for 256 races");
}

/// Runs `faults RACES ACTION` until it says it raced, waits until `written` holds of the
/// report folder (or 20 s), kills it with SIGKILL and returns the reports it left.
fn killed_after_races(name: &str, args: &[&str], written: impl Fn(&Path) -> bool) -> Vec<(PathBuf, Report)> {
    let dir = scratch(name);
    let mut child = preloaded(&dir, &faults(), args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    wait_for_races(&mut child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !written(&dir) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    reports_in(&dir, "report.")
}

/// The races in the first report of `dir`, its race log included (0 without a report).
fn races_on_disk(dir: &Path) -> usize {
    reports_in(dir, "report.").first().map_or(0, |(_, report)| report.races.len())
}

#[test]
fn sigkill_loses_no_race_found_before_it() {
    // Three races, told to the model moments after the program's synchronize (its join
    // queued behind them, the watcher asked to tell): the report written at the first two,
    // the third in its race log.
    let reports = killed_after_races("sigkill", &["3", "sleep"], |dir| races_on_disk(dir) == 3);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].1.races.len(), 3, "the report with its race log");
}

#[test]
fn a_race_among_launches_no_call_follows_is_on_the_disk_before_a_sigkill() {
    // The program makes no call after its racy launch: the shim's watcher tells the model.
    let reports =
        killed_after_races("sigkill-launched", &["1", "launched"], |dir| !reports_in(dir, "report.").is_empty());
    assert_eq!(reports.len(), 1, "the race written while the program slept");
    assert_eq!(reports[0].1.races.len(), 1);
}

// ---- signals in the program ----------------------------------------------------------------

/// `faults 3 raise SIGNAL`: the program dies of it, as natively, its report written first.
fn raised_after_races(signal: i32) {
    let dir = scratch("raise");
    let out =
        output_bounded(with_default_interrupts(&mut preloaded(&dir, &faults(), &["3", "raise", &signal.to_string()])));
    assert_eq!(
        out.status.signal(),
        Some(signal),
        "died of the signal as without streamsan: {:?}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "", "the program did not run on after the signal");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports[0].1.races.len(), 3);
    assert_eq!(reports[0].1.intercepted.get("cuCtxSynchronize"), Some(&4), "the final report, written at the signal");
    assert!(!dir.join(".report.races").exists());
}

#[test]
fn raise_sigterm_after_races_writes_the_report_then_dies_of_it() {
    raised_after_races(libc::SIGTERM);
}

#[test]
fn raise_sigint_after_races_writes_the_report_then_dies_of_it() {
    raised_after_races(libc::SIGINT);
}

#[test]
fn the_programs_own_handler_runs_after_the_report_is_written() {
    let dir = scratch("handled");
    let out = output_bounded(&mut preloaded(&dir, &faults(), &["3", "handled"]));
    assert_eq!(text(&out.stdout), "handled\n", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(7), "the handler's own _exit");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports[0].1.races.len(), 3);
    assert_eq!(
        reports[0].1.intercepted.get("cuCtxSynchronize"),
        Some(&4),
        "written at the signal, before the handler's _exit"
    );
}

/// A host function or stream callback may end the thread it runs on: CPython ends a thread
/// that takes the GIL while the interpreter finalizes with `pthread_exit`, a forced unwind
/// through whatever called the function (the driver's thread natively; the shim's
/// trampoline under it).
#[test]
fn a_host_function_that_ends_its_thread_ends_it_as_without_streamsan() {
    let dir = scratch("thread-exit");
    let native = Command::new(faults())
        .args(["3", "thread_exit"])
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STANDIN_DEFER_CALLBACKS", "1")
        .output()
        .unwrap();
    assert_eq!((native.status.code(), text(&native.stdout)), (Some(0), "joined\njoined\n".to_string()), "natively");
    let out = preloaded(&dir, &faults(), &["3", "thread_exit"]).env("STANDIN_DEFER_CALLBACKS", "1").output().unwrap();
    assert_eq!(text(&out.stdout), "joined\njoined\n", "{:?}\n{}", out.status, text(&out.stderr));
    assert_eq!(out.status.code(), Some(66), "the races' exit status");
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 3);
}

#[test]
fn a_report_folder_deleted_before_sigterm_goes_to_stderr() {
    let dir = scratch("vanished");
    let mut child =
        preloaded(&dir, &lifecycle(), &["sleep"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_for_races(&mut child);
    std::fs::remove_dir_all(&dir).unwrap();
    send(child.id(), libc::SIGTERM);
    let mut from = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut stderr = String::new();
        from.read_to_string(&mut stderr).unwrap();
        stderr
    });
    let status = wait_bounded(&mut child);
    let stderr = reader.join().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert!(stderr.contains("cannot write the report to"), "{stderr}");
    assert_eq!(report_on_stderr(&stderr)["races"].as_array().unwrap().len(), 1);
}

// ---- signals to the wrapper ----------------------------------------------------------------

/// `streamsan run -- lifecycle sleep`, sent `signal` once the program raced.
fn wrapper_sent(signal: i32) {
    let dir = scratch("wrapper-signal");
    // Not a pipe: a program left running (the fault this guards against) would hold it open.
    let stderr_file = dir.join("stderr");
    let mut wrapper = streamsan(&dir)
        .args(["run", "--report", &report_arg(&dir), "--"])
        .arg(lifecycle())
        .arg("sleep")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .spawn()
        .unwrap();
    wait_for_races(&mut wrapper);
    send(wrapper.id(), signal);
    let status = wait_bounded(&mut wrapper);
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();
    let reports = reports_in(&dir, "report.");
    let program_left_running = {
        // SAFETY: probing, then ending, the program this test started.
        let pid = reports[0].1.pid as i32;
        unsafe { libc::kill(pid, 0) == 0 && libc::kill(pid, libc::SIGKILL) == 0 }
    };
    assert!(!program_left_running, "the program got the signal");
    assert!(
        stderr.contains("streamsan: 1 race (1 cross-stream-race) in 1 report"),
        "the wrapper summarized:\n{stderr}"
    );
    assert_eq!(status.signal(), Some(signal), "the wrapper ends as the program did: {status:?}");
    assert_eq!(reports[0].1.intercepted.get("cuCtxSynchronize"), Some(&2), "the program wrote its final report");
}

#[test]
fn sigterm_sent_to_streamsan_run_reaches_the_program() {
    wrapper_sent(libc::SIGTERM);
}

#[test]
fn sighup_sent_to_streamsan_run_reaches_the_program() {
    wrapper_sent(libc::SIGHUP);
}

#[test]
fn a_killed_wrapper_leaves_the_program_its_report() {
    let dir = scratch("wrapper-killed");
    let mut wrapper = streamsan(&dir)
        .args(["run", "--report", &report_arg(&dir), "--"])
        .arg(lifecycle())
        .arg("sleep")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_races(&mut wrapper);
    wrapper.kill().unwrap();
    wrapper.wait().unwrap();
    // What a killed wrapper leaves behind: its run's list of reports.
    let list = std::env::temp_dir().join(format!("streamsan-run.{}.0", wrapper.id()));
    assert!(list.is_file(), "{}", list.display());
    std::fs::remove_file(list).unwrap();
    // The program runs on; its report names it (written moments after its synchronize).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while races_on_disk(&dir) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (path, _) = reports_in(&dir, "report.").pop().expect("the report of the first race");
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let pid: i32 = name.trim_start_matches("report.").trim_end_matches(".json").parse().unwrap();
    send(pid as u32, libc::SIGTERM);
    // Not our child: wait for it to be gone.
    wait_gone(pid);
    let report = Report::read_from(&path).unwrap();
    assert_eq!(report.races.len(), 1);
    assert_eq!(report.intercepted.get("cuCtxSynchronize"), Some(&2), "the final report, written at the signal");
}

// ---- a closed pipe -------------------------------------------------------------------------

#[test]
fn streamsan_report_into_a_closed_pipe_exits_quietly() {
    // A report longer than a pipe holds, so that the reader's leaving is felt: 400 races
    // at different call sites.
    let dir = scratch("big-report");
    streamsan(&dir)
        .args(["run", "--quiet", "--report", &report_arg(&dir), "--"])
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    let mut report = reports_in(&dir, "report.").pop().unwrap().1;
    let race = report.races[0].clone();
    report.races = (0..400)
        .map(|i| {
            let mut race = race.clone();
            for frame in &mut race.first.site {
                frame.function = Some(format!("site_{i}"));
            }
            race
        })
        .collect();
    let path = dir.join("big.json");
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();
    let mut child =
        streamsan(&dir).arg("report").arg(&path).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // The reader is gone (`| head -1`).
    let out = child.wait_with_output().unwrap();
    assert_eq!(text(&out.stderr), "", "no panic, no message");
    assert_eq!(out.status.code(), Some(1), "the status still says races remain");
}

// ---- runs that checked nothing ------------------------------------------------------------

/// A run of `lifecycle races` whose program runs without the shim: it runs as it does alone,
/// and the run fails saying why nothing was checked.
fn unchecked(dir: &Path, command: &mut Command, why: &str) {
    let out = command.output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(text(&out.stdout), "done\n", "{stderr}");
    assert!(stderr.contains(why), "{stderr}");
    assert!(!stderr.contains("made no CUDA driver call"), "{stderr}");
    assert_eq!(out.status.code(), Some(66), "a run that checked nothing fails: {stderr}");
    assert!(reports_in(dir, "report.").is_empty());
}

#[test]
fn a_shim_that_is_not_loaded_fails_the_run() {
    let dir = scratch("not-loaded");
    let mut command = streamsan(&dir);
    command.env("STREAMSAN_SHIM", standin_sanitizer()).args(["run", "--report", &report_arg(&dir), "--"]);
    unchecked(&dir, command.arg(lifecycle()).arg("races"), "was not loaded into the program, so nothing was checked");
}

#[test]
fn a_program_started_with_its_environment_cleared_fails_the_run() {
    let dir = scratch("env-cleared");
    let library_path = format!("LD_LIBRARY_PATH={}", driver_dir().display());
    let mut command = streamsan(&dir);
    command.args(["run", "--report", &report_arg(&dir), "--", "env", "-i", &library_path]);
    unchecked(&dir, command.arg(lifecycle()).arg("races"), "with an environment that no longer preloads the shim");
}

/// Told otherwise (`--exitcode 0`), a run that checked nothing says so and keeps the
/// program's status.
#[test]
fn a_run_that_checked_nothing_keeps_the_programs_status_with_exitcode_0() {
    let dir = scratch("env-cleared-allowed");
    let library_path = format!("LD_LIBRARY_PATH={}", driver_dir().display());
    let out = streamsan(&dir)
        .args(["run", "--exitcode", "0", "--report", &report_arg(&dir), "--", "env", "-i", &library_path])
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("no longer preloads the shim"), "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_worker_still_running_after_its_launcher_fails_the_run() {
    let dir = scratch("worker-running");
    let out_file = dir.join("worker.out");
    // The launcher leaves once its worker has raced; the worker, its output away from the
    // wrapper's pipes, waits to be killed.
    let script = format!(
        "\"$0\" sleep > {0} 2>&1 & for i in $(seq 500); do grep -q raced {0} && exit 0; sleep 0.02; done; exit 9",
        out_file.display()
    );
    let out = output_bounded(
        streamsan(&dir).args(["run", "--report", &report_arg(&dir), "--", "sh", "-c", &script]).arg(lifecycle()),
    );
    let stderr = text(&out.stderr);
    let worker: Option<i32> = stderr
        .split("process ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|pid| pid.parse().ok())
        .filter(|_| stderr.contains("called the driver and is still running"));
    // SAFETY: ending the worker this test started, before any assertion can fail.
    if let Some(pid) = worker {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(worker.is_some(), "{stderr}");
    assert_eq!(out.status.code(), Some(66), "{stderr}");
}

#[test]
fn a_program_that_makes_no_driver_call_passes_and_says_so() {
    let dir = scratch("no-call");
    let out = streamsan(&dir).args(["run", "--report", &report_arg(&dir), "--", "true"]).output().unwrap();
    assert!(text(&out.stderr).contains("the program made no CUDA driver call"), "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
}

// ---- bytes that are not UTF-8 ----------------------------------------------------------------

/// A name with a byte that is not UTF-8 (a Latin-1 `é`).
fn latin1(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0xe9);
    dir.join(std::ffi::OsStr::from_bytes(&bytes))
}

/// A working directory whose name is not UTF-8 keeps the report (in it, as named), and the
/// run's summary finds it.
#[test]
fn a_working_directory_not_in_utf8_keeps_the_report() {
    let dir = latin1(&scratch("latin1-cwd"), "caf");
    std::fs::create_dir(&dir).unwrap();
    let out = streamsan(&dir).current_dir(&dir).args(["run", "--"]).arg(lifecycle()).arg("races").output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(66), "{stderr}");
    assert!(stderr.contains("2 races (1 cross-stream-race, 1 use-before-alloc) in 1 report"), "{stderr}");
    assert_eq!(reports_in(&dir, "streamsan.")[0].1.races.len(), 2);
}

/// The name `stem`, a Latin-1 `é`, `rest` (`r\xe9.json`), in `dir`.
fn latin1_in(dir: &Path, stem: &str, rest: &str) -> PathBuf {
    let mut name = latin1(dir, stem).into_os_string();
    name.push(rest);
    PathBuf::from(name)
}

/// A `--report` that is not UTF-8 gets the report at exactly that path, `%p` expanded; the
/// summary shows the byte as `\xE9`, and `streamsan report` reads the report there.
#[test]
fn a_report_path_not_in_utf8_is_written_and_read_back() {
    let dir = scratch("latin1-report");
    let out = streamsan(&dir)
        .arg("run")
        .arg("--report")
        .arg(latin1_in(&dir, "r", ".%p.json"))
        .arg("--")
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(66), "{stderr}");
    let reports = reports_in(&dir, "r");
    assert_eq!(reports.len(), 1, "{stderr}");
    let (path, report) = &reports[0];
    assert_eq!(path, &latin1_in(&dir, "r", &format!(".{}.json", report.pid)));
    assert_eq!(report.races.len(), 2);
    let shown = format!("{}/r\\xE9.{}.json", dir.display(), report.pid);
    assert!(
        stderr.contains(&format!("2 races (1 cross-stream-race, 1 use-before-alloc) in 1 report: {shown}")),
        "{stderr}"
    );
    let out = streamsan(&dir).arg("report").arg(path).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("streamsan: 2 races"), "{}", text(&out.stdout));
    let out = streamsan(&dir).arg("report").arg(latin1_in(&dir, "gone", ".json")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&format!("{}/gone\\xE9.json: ", dir.display())), "{}", text(&out.stderr));
}

/// A suppressions file whose name is not UTF-8 is read, by `streamsan run` (a missing one
/// named with the byte as `\xE9`) and by `streamsan report`, with `--suppressions FILE` and
/// `--suppressions=FILE`.
#[test]
fn a_suppressions_file_not_in_utf8_suppresses() {
    let dir = scratch("latin1-suppressions");
    let supp = latin1(&dir, "s.supp");
    let run = || {
        streamsan(&dir)
            .args(["run", "--report", &report_arg(&dir), "--suppressions"])
            .arg(&supp)
            .arg("--")
            .arg(lifecycle())
            .arg("races")
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(out.status.code(), Some(2));
    let missing = format!("cannot read the suppressions file {}/s.supp\\xE9", dir.display());
    assert!(text(&out.stderr).contains(&missing), "{}", text(&out.stderr));
    assert!(calls(&dir).is_empty(), "the program did not run");
    std::fs::write(&supp, "race:lifecycle.c\n").unwrap();
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = reports_in(&dir, "report.")[0].clone();
    assert_eq!((report.1.races.len(), report.1.summary.suppressed), (0, 2));
    std::fs::remove_file(&report.0).unwrap();
    streamsan(&dir)
        .args(["run", "--quiet", "--report", &report_arg(&dir), "--"])
        .arg(lifecycle())
        .arg("races")
        .status()
        .unwrap();
    let report = reports_in(&dir, "report.")[0].0.clone();
    let mut flag = std::ffi::OsString::from("--suppressions=");
    flag.push(&supp);
    for args in [vec![std::ffi::OsString::from("--suppressions"), supp.clone().into()], vec![flag]] {
        let out = streamsan(&dir).arg("report").args(&args).arg(&report).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("no race, 2 suppressed"), "{}", text(&out.stdout));
    }
}

/// `STREAMSAN_OPTIONS` is bytes: `log_path` and `suppressions` may name files that are not
/// UTF-8, for `streamsan run` and for a shim preloaded by hand; any other value that is not
/// UTF-8 stops the program before it starts, saying which.
#[test]
fn streamsan_options_take_paths_not_in_utf8_and_no_other_value() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let dir = scratch("latin1-options");
    let wrong = std::ffi::OsStr::from_bytes(b"halt_on_error=1:exitcode=9\xe9");
    let out = streamsan(&dir)
        .env("STREAMSAN_OPTIONS", wrong)
        .args(["run", "--"])
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    let why = "STREAMSAN_OPTIONS: option exitcode takes UTF-8 text, not \"9\\xE9\"";
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    let out = Command::new(lifecycle())
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STANDIN_LOG", dir.join("calls.log"))
        .env("STREAMSAN_OPTIONS", wrong)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    assert!(calls(&dir).is_empty(), "the program did not run");
    let supp = latin1(&dir, "s.supp");
    std::fs::write(&supp, "race:lifecycle.c\n").unwrap();
    let options = |report: &Path| {
        let bytes = [&b"log_path="[..], report.as_os_str().as_bytes(), b":suppressions=", supp.as_os_str().as_bytes()];
        std::ffi::OsString::from_vec(bytes.concat())
    };
    let by_hand = latin1_in(&dir, "hand", ".json");
    let out = Command::new(lifecycle())
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", options(&by_hand))
        .env_remove("STREAMSAN_RUN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(Report::read_from(&by_hand).unwrap().summary.suppressed, 2);
    let run = latin1_in(&dir, "run", ".json");
    let out = streamsan(&dir)
        .env("STREAMSAN_OPTIONS", options(&run))
        .args(["run", "--"])
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(Report::read_from(&run).unwrap().summary.suppressed, 2);
}
