//! `streamsan run`: its options, the same options in `STREAMSAN_OPTIONS` for a hand-preloaded
//! shim, exit statuses, and the mistakes it stops at before the program starts.

use std::process::{Command, Output};

use crate::common::*;

fn run_cli(dir: &std::path::Path, args: &[&str]) -> Output {
    streamsan(dir).args(args).output().expect("run streamsan")
}

#[test]
fn a_run_with_races_exits_66_and_a_clean_one_0() {
    let exe = lifecycle();
    let dir = scratch("exit-races");
    let racy = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(racy.status.code(), Some(66), "{}", text(&racy.stderr));
    assert_eq!(text(&racy.stdout), "done\n", "the program ran to its end");
    assert!(
        text(&racy.stderr).contains("streamsan: 2 races (1 cross-stream-race, 1 use-before-alloc) in 1 report"),
        "{}",
        text(&racy.stderr)
    );
    let dir = scratch("exit-clean");
    let clean = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "clean"]);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean.stderr));
    assert!(text(&clean.stderr).contains("streamsan: no race in 1 report"), "{}", text(&clean.stderr));
}

#[test]
fn the_programs_own_failure_status_wins_and_exitcode_changes_ours() {
    let exe = lifecycle();
    let dir = scratch("exit-fail");
    let failing = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "fail"]);
    assert_eq!(failing.status.code(), Some(3));
    let dir = scratch("exit-code");
    let custom =
        run_cli(&dir, &["run", "--exitcode", "7", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(custom.status.code(), Some(7));
}

#[test]
fn halt_on_error_stops_at_the_first_race() {
    let exe = lifecycle();
    let dir = scratch("halt");
    let out =
        run_cli(&dir, &["run", "--halt-on-error", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(out.status.code(), Some(66));
    assert_eq!(text(&out.stdout), "", "the program stopped before printing done");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].1.races.len(), 1, "only the first race");
    assert!(text(&out.stderr).contains("halting at the first race"), "{}", text(&out.stderr));
}

#[test]
fn a_race_among_launches_is_reported_and_halting_stops_at_the_racy_launch() {
    // Launches wait in the batch and the watcher thread tells them, at a moment that depends
    // on the machine's load; that it does so with no driver call after them is
    // `faults::a_race_among_launches_no_call_follows_is_on_the_disk_before_a_sigkill`.
    let exe = lifecycle();
    let dir = scratch("late");
    let out = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "late"]);
    assert!(text(&out.stderr).contains("WARNING: streamsan: cross-stream-race"), "{}", text(&out.stderr));
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 1);
    let out =
        run_cli(&dir, &["run", "--halt-on-error", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "late"]);
    assert_eq!(out.status.code(), Some(66));
    assert!(!text(&out.stderr).contains("raced"), "stopped at the racy launch: {}", text(&out.stderr));
}

#[test]
fn print_limit_and_quiet_bound_what_is_printed_not_what_is_reported() {
    let exe = lifecycle();
    let dir = scratch("print-limit");
    let out = run_cli(
        &dir,
        &["run", "--print-limit", "1", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("WARNING: streamsan").count(), 1, "{stderr}");
    assert!(stderr.contains("WARNING: streamsan: cross-stream-race"), "the first race found is printed: {stderr}");
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 2);
    let dir = scratch("quiet");
    let out = run_cli(&dir, &["run", "--quiet", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(text(&out.stderr), "", "quiet");
    assert_eq!(out.status.code(), Some(66));
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 2);
}

#[test]
fn backtrace_depth_bounds_each_call_site() {
    let exe = lifecycle();
    let dir = scratch("depth");
    run_cli(
        &dir,
        &["run", "--backtrace-depth", "2", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"],
    );
    let report = &reports_in(&dir, "report.")[0].1;
    for race in &report.races {
        assert!(race.first.site.len() <= 2 && race.second.site.len() <= 2, "{:?}", race.second.site);
        assert!(!race.second.site.is_empty());
    }
}

/// The depth is the capture's as well as the report's: a call site deeper than the default
/// (24) keeps as many frames as asked, up to the option's bound, and the default keeps 24.
#[test]
fn backtrace_depth_is_how_deep_each_call_site_is_captured() {
    let exe = lifecycle();
    let sites = |depth: Option<&str>| {
        let dir = scratch(&format!("deep-{}", depth.unwrap_or("default")));
        let report = report_arg(&dir);
        let depth = depth.map_or(vec![], |depth| vec!["--backtrace-depth", depth]);
        let args = [&["run"][..], &depth, &["--report", &report, "--", exe.to_str().unwrap(), "deep"]].concat();
        run_cli(&dir, &args);
        let report = &reports_in(&dir, "report.")[0].1;
        let race = report.races.first().expect("the RAW is reported");
        let deep = race.second.site.iter().filter(|f| f.function.as_deref() == Some("deep")).count();
        (race.second.site.len(), deep)
    };
    assert_eq!(sites(Some("50")), (50, 48), "launch and cross_stream are innermost");
    assert_eq!(sites(None).0, 24);
    assert_eq!(sites(Some("64")).0, 64);
}

#[test]
fn streamsan_options_drive_a_shim_preloaded_by_hand() {
    let exe = lifecycle();
    let dir = scratch("by-hand");
    let out = Command::new(&exe)
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}:halt_on_error=1:exitcode=9", report_arg(&dir)))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", text(&out.stderr));
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 1);
    // A wrong option stops the program before it starts.
    let out = Command::new(&exe)
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STANDIN_LOG", dir.join("calls.log"))
        .env("STREAMSAN_OPTIONS", "halt_on_eror=1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("STREAMSAN_OPTIONS: unknown option \"halt_on_eror\""), "{}", text(&out.stderr));
    assert!(calls(&dir).is_empty(), "the program did not run");
}

#[test]
fn mistakes_stop_the_run_before_the_program_starts() {
    let exe = lifecycle();
    let exe = exe.to_str().unwrap();
    let dir = scratch("mistakes");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--frobnicate".into()], "unknown option --frobnicate"),
        (vec!["--exitcode".into(), "300".into()], "exitcode takes a whole number from 0 to 255"),
        (vec!["--print-limit".into()], "--print-limit needs a value"),
        (
            vec!["--suppressions".into(), dir.join("missing.supp").to_string_lossy().into()],
            "cannot read the suppressions file",
        ),
        (vec!["--report".into(), dir.join("no/such/dir/r.%p.json").to_string_lossy().into()], "is not a directory"),
    ];
    for (flags, message) in cases {
        let mut args = vec!["run".to_string()];
        args.extend(flags);
        args.extend(["--".into(), exe.into(), "races".into()]);
        let out = streamsan(&dir).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(message), "{args:?}: {}", text(&out.stderr));
        assert!(calls(&dir).is_empty(), "{args:?}: the program ran");
    }
}

/// `--report races.json`: a bare name is a file of the current directory.
#[test]
fn a_report_named_without_a_directory_goes_to_the_current_one() {
    let exe = lifecycle();
    let dir = scratch("bare-name");
    let out = streamsan(&dir)
        .current_dir(&dir)
        .args(["run", "--report", "races.json", "--", exe.to_str().unwrap(), "races"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66), "{}", text(&out.stderr));
    assert!(!streamsan::report::Report::read_from(&dir.join("races.json")).unwrap().races.is_empty());
}

/// The run's list of reports goes to the temporary directory: one that is not there stops
/// the run, with the system's reason.
#[test]
fn a_temporary_directory_that_is_not_there_stops_the_run() {
    let exe = lifecycle();
    let dir = scratch("no-tmp");
    let out = streamsan(&dir)
        .env("TMPDIR", dir.join("gone"))
        .args(["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "races"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cannot create the run's list of reports") && stderr.contains("No such file"), "{stderr}");
    assert!(calls(&dir).is_empty(), "the program ran");
}

#[test]
fn a_report_file_already_there_is_not_overwritten() {
    let exe = lifecycle();
    let dir = scratch("existing");
    let path = dir.join("r.json");
    std::fs::write(&path, "mine").unwrap();
    let out = run_cli(&dir, &["run", "--report", path.to_str().unwrap(), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("exists already"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    // Nor through a symbolic link.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let out = run_cli(&dir, &["run", "--report", link.to_str().unwrap(), "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
}

#[test]
fn once_running_a_report_that_cannot_be_written_goes_to_stderr() {
    // The path appears between the check and the write (a pid-named file left behind, a
    // race with another tool): the program runs on, the report goes to stderr.
    let exe = lifecycle();
    let dir = scratch("fallback");
    let out = Command::new(&exe)
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}", dir.join("taken").display()))
        .env("STANDIN_LOG", dir.join("calls.log"))
        .current_dir(&dir)
        .output()
        .unwrap();
    // Not taken: the report is the file.
    assert_eq!(out.status.code(), Some(66));
    assert!(dir.join("taken").is_file());
    let dir = scratch("fallback-taken");
    std::fs::create_dir(dir.join("taken")).unwrap();
    let out = Command::new(&exe)
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STREAMSAN_OPTIONS", format!("log_path={}", dir.join("taken").display()))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(text(&out.stdout), "done\n", "the program ran on");
    assert_eq!(out.status.code(), Some(66));
    assert!(stderr.contains("cannot write the report to") && stderr.contains("it goes to stderr at exit"), "{stderr}");
    let json = &stderr[stderr.find("streamsan: the report (").expect("the report on stderr")..];
    let json = &json[json.find('{').unwrap()..];
    let report: serde_json::Value = serde_json::from_str(json.trim()).expect("a whole JSON report on stderr");
    assert_eq!(report["races"].as_array().unwrap().len(), 2);
}

#[test]
fn every_process_of_a_job_writes_its_own_report() {
    let exe = lifecycle();
    let dir = scratch("fork");
    let out = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "fork"]);
    assert_eq!(text(&out.stdout), "child exited 66\ndone\n", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(66));
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 2, "{reports:?}");
    let kinds = |r: &streamsan::report::Report| r.races.iter().map(|x| x.kind).collect::<Vec<_>>();
    let mut found: Vec<_> = reports.iter().map(|(_, r)| (r.pid, kinds(r))).collect();
    found.sort_by_key(|(_, k)| k.clone());
    // The child reports its own race, not its parent's again.
    assert_eq!(
        found.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>(),
        [vec!["cross-stream-race"], vec!["use-before-alloc"]]
    );
    assert_ne!(found[0].0, found[1].0);
    // Nor does it print it: the parent's work was told before the fork.
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("WARNING: streamsan: cross-stream-race").count(), 1, "{stderr}");
}

/// A forked child counts its own races against the print limit, not its parent's too.
#[test]
fn a_forked_child_prints_its_own_first_race() {
    let exe = lifecycle();
    let dir = scratch("fork-limit");
    let out = run_cli(
        &dir,
        &["run", "--print-limit", "1", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), "fork"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("WARNING: streamsan: cross-stream-race").count(), 1, "the parent's: {stderr}");
    assert_eq!(stderr.matches("WARNING: streamsan: use-before-alloc").count(), 1, "the child's: {stderr}");
}

#[test]
fn help_is_asked_for_before_the_program_and_given_to_it_after() {
    let dir = scratch("help");
    for args in [&["--help"][..], &["run", "--help"], &["run", "-h"], &["report", "--help"]] {
        let out = run_cli(&dir, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with("usage: streamsan run"), "{args:?}: {}", text(&out.stdout));
    }
    // After `--`, or after the program's name, `--help` is the program's.
    let report = report_arg(&dir);
    for args in
        [&["run", "--report", &report, "--", "printf", "%s\n", "--help"][..], &["run", "printf", "%s\n", "--help"]]
    {
        let out = run_cli(&dir, args);
        assert_eq!(text(&out.stdout), "--help\n", "{args:?}: {}", text(&out.stderr));
    }
}

/// `--phase-times`: at exit, each phase's count and time, and each entry point's, counted
/// as the report counts the calls.
#[test]
fn phase_times_prints_each_phase_and_entry_point_at_exit() {
    let (dir, out) = lifecycle_with_phase_times("phase-times", "races");
    assert_eq!(out.status.code(), Some(66), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let count = |label: &str| phase_count(&stderr, label);
    // The program launches three kernels and makes two races; no copy, no memset.
    assert_eq!(count("launches in the driver"), 3);
    assert_eq!(count("kernel name and layout"), 3);
    assert_eq!(count("model update: launches, NCCL"), 3);
    assert_eq!(count("model update: copies"), 0);
    assert_eq!(count("race reports (in updates)"), 2);
    // A capture unwinds only where the thread has not met the chain before.
    let (captures, unwinds) = (count("call-site capture"), count("of which unwinds (chain not remembered)"));
    assert!(unwinds >= 1 && unwinds <= captures, "{unwinds} unwinds in {captures} captures");
    let reports = reports_in(&dir, "report.");
    assert_eq!(reports.len(), 1);
    let intercepted = &reports[0].1.intercepted;
    assert!(intercepted.contains_key("cuLaunchKernel"), "{intercepted:?}");
    for (name, &calls) in intercepted {
        assert_eq!(count(name), calls, "{name}");
    }
}

/// A call chain met again is read from the stack, not unwound, wherever the stack lies: the
/// same chains (a launch, a `cuLaunchKernelEx`, a memset) from four stack positions 16 bytes
/// apart are unwound once from each. A hook frame that realigns its stack pointer (a local
/// aligned beyond 16 bytes) puts two of them at one anchor with their frames apart, and the
/// chain trie then unwinds one at every call.
#[test]
fn a_chain_met_again_is_not_unwound_wherever_the_stack_lies() {
    let (_, out) = lifecycle_with_phase_times("stack-offsets", "offsets");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let captures = phase_count(&stderr, "call-site capture");
    let unwinds = phase_count(&stderr, "of which unwinds (chain not remembered)");
    // Twelve chains (three hooks at four offsets) and the setup's calls, met once each.
    assert!(captures >= 1200, "{captures} captures");
    assert!(unwinds <= 32, "{unwinds} unwinds in {captures} captures");
}

/// `lifecycle MODE` run under `streamsan run --phase-times`, its report in a scratch folder
/// named `name`: the folder and the run.
fn lifecycle_with_phase_times(name: &str, mode: &str) -> (std::path::PathBuf, Output) {
    let exe = lifecycle();
    let dir = scratch(name);
    let out =
        run_cli(&dir, &["run", "--phase-times", "--report", &report_arg(&dir), "--", exe.to_str().unwrap(), mode]);
    (dir, out)
}

#[test]
fn a_shim_preloaded_by_hand_writes_streamsan_pid_json_by_default() {
    let exe = lifecycle();
    let dir = scratch("default-path");
    let out = Command::new(&exe)
        .arg("races")
        .env("LD_PRELOAD", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env_remove("STREAMSAN_OPTIONS")
        .env_remove("STREAMSAN_RUN")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66), "{}", text(&out.stderr));
    let reports = reports_in(&dir, "streamsan.");
    assert_eq!(reports.len(), 1, "as `streamsan run` does");
    let (path, report) = &reports[0];
    assert_eq!(path.file_name().unwrap().to_string_lossy(), format!("streamsan.{}.json", report.pid));
    assert_eq!(report.races.len(), 2);
}

/// `--name=value` works for every option that takes a value; a switch takes none.
#[test]
fn every_option_taking_a_value_takes_it_after_an_equals_sign() {
    let exe = lifecycle();
    let dir = scratch("equals");
    let supp = dir.join("none.supp");
    std::fs::write(&supp, "race:nothing_matches_this\n").unwrap();
    let mut args: Vec<String> = vec!["run".into()];
    for flag in streamsan::options::Options::flags().iter().filter(|f| f.takes_value()) {
        let value = match flag.name {
            "--report" => report_arg(&dir),
            "--suppressions" => supp.to_string_lossy().into_owned(),
            "--exitcode" => "7".into(),
            "--footprint" => "params".into(),
            "--pageable-copies" => "async".into(),
            _ => "8".into(),
        };
        args.push(format!("{}={value}", flag.name));
    }
    args.extend(["--".into(), exe.to_string_lossy().into_owned(), "races".into()]);
    let out = streamsan(&dir).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{args:?}: {}", text(&out.stderr));
    assert_eq!(reports_in(&dir, "report.")[0].1.races.len(), 2);
    let out = run_cli(&dir, &["run", "--quiet=1", "--", exe.to_str().unwrap(), "races"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--quiet takes no value"), "{}", text(&out.stderr));
}

/// As shells do: 127 for a program not found, 126 for one that is there and cannot run.
#[test]
fn a_program_not_found_exits_127_and_one_that_cannot_run_126() {
    let dir = scratch("cannot-run");
    let out = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", dir.join("absent").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    let plain = dir.join("plain.txt");
    std::fs::write(&plain, "not a program").unwrap();
    let out = run_cli(&dir, &["run", "--report", &report_arg(&dir), "--", plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot run"), "{}", text(&out.stderr));
}
