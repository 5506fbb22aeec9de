//! Call sites name the program's own code: a Python script's lines (not the interpreter's),
//! a Rust program's `main.rs` (not its dependencies').

use std::path::Path;

use crate::common::*;

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/python_race.py")
}

/// The line of `marker` in the script.
fn line_of(marker: &str) -> u32 {
    let text = std::fs::read_to_string(script()).unwrap();
    text.lines().position(|l| l.contains(marker)).expect("marker") as u32 + 1
}

#[test]
fn a_python_programs_race_names_its_lines() {
    check_python_frames(&[]);
}

#[test]
fn python_frames_also_come_from_a_thread_that_holds_the_gil() {
    check_python_frames(&["--hold-gil"]);
}

fn check_python_frames(extra: &[&str]) {
    let mut args = vec![script().to_str().unwrap().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = run(Path::new("python3"), &args.iter().map(String::as_str).collect::<Vec<_>>());
    run.assert_ran();
    let report = run.report();
    let race = report.races_of("use-before-alloc").next().expect("the use-before-alloc is reported");
    // The Python frames, innermost first: launch() at its driver call, main() at THE LAUNCH,
    // the module at main().
    let python: Vec<(String, u32)> = race
        .second
        .site
        .iter()
        .filter(|f| f.module.as_deref() == Some("python"))
        .map(|f| {
            assert!(f.file.as_deref().unwrap().ends_with("python_race.py"), "{f:?}");
            (f.function.clone().unwrap(), f.line.unwrap())
        })
        .collect();
    assert_eq!(
        python,
        vec![
            ("launch".to_string(), line_of("check(cuda.cuLaunchKernel")),
            ("main".to_string(), line_of("# THE LAUNCH")),
            ("<module>".to_string(), line_of("main(\"fixed\" in")),
        ]
    );
    // The interpreter's own frames give way to the script's.
    assert!(!race.second.site.iter().any(|f| f.function.as_deref() == Some("_PyEval_EvalFrameDefault")));
    let missing_wait = streamsan::report::text::missing_wait(race);
    assert!(missing_wait.contains("python_race.py:"), "{missing_wait}");
    assert!(run.stderr().contains(&format!("python_race.py:{}", line_of("# THE LAUNCH"))), "{}", run.stderr());
}

/// A Python program's native chain is kept up to the interpreter's first frame, where its
/// report puts the Python frames: the frames above it are never shown, and were read again
/// at every capture from the same place (a ctypes, CuPy or numba launch is a few frames from
/// the interpreter, then many more inside it). Here the
/// launches are a dozen calls through C deep, some seventy native frames, with captures
/// allowed 64: each chain unwound keeps the few below the interpreter.
#[test]
fn a_python_programs_native_chain_ends_at_the_interpreter() {
    let options = RunOptions {
        env: vec![("STREAMSAN_OPTIONS", "phase_times=1:backtrace_depth=64".to_string())],
        ..RunOptions::default()
    };
    let run = run_with(Path::new("python3"), &[script().to_str().unwrap(), "--deep"], options);
    run.assert_ran();
    let race = run.report().races_of("use-before-alloc").next().cloned().expect("the use-before-alloc is reported");
    let functions: Vec<_> = race.second.site.iter().filter_map(|f| f.function.as_deref()).collect();
    assert!(functions.contains(&"through_c"), "Python frames read past the first checked reads: {functions:?}");
    let stderr = run.stderr();
    let (unwinds, frames) = (
        phase_count(&stderr, "of which unwinds (chain not remembered)"),
        phase_count(&stderr, "frames of chains unwound"),
    );
    assert!(unwinds >= 1 && frames <= 32 * unwinds, "{frames} frames in {unwinds} chains");
}

#[test]
fn the_fixed_python_program_is_clean() {
    let run = run(Path::new("python3"), &[script().to_str().unwrap(), "fixed"]);
    run.assert_ran();
    assert!(run.report().races.is_empty());
}

#[test]
fn a_rust_programs_race_names_its_own_source() {
    let exe = artifacts().join("streamsan-cudarc-app");
    let run = run(&exe, &["2", "--racy"]);
    run.assert_ran();
    let report = run.report();
    for kind in ["use-before-alloc", "cross-stream-race", "free-race"] {
        assert!(report.races_of(kind).next().is_some(), "{kind} not reported: {:?}", report.summary);
    }
    for race in &report.races {
        let site = streamsan::report::text::describe_site(&race.second.site);
        // Its `main`: named by its path in a debug build; an optimized build's line tables
        // name inlined functions without their crate.
        let in_main = site.ends_with(" in streamsan_cudarc_app::main") || site.ends_with(" in main");
        assert!(site.contains("cudarc-app/src/main.rs:") && in_main, "{site}");
        assert!(!site.contains("::h"), "symbol hash left in {site}");
    }
    // The same program with cudarc's own event tracking is clean.
    let clean = run_with(&exe, &["2"], RunOptions::default());
    assert!(clean.report().races.is_empty(), "{:?}", clean.report().races);
}
