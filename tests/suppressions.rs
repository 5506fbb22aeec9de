//! Suppressions in a run: what each type of line leaves out, the count it leaves in the
//! summary, and a bad file stopping the run before the program starts.

use crate::common::*;
use streamsan::report::Report;

/// `lifecycle races` (a cross-stream race and a use-before-alloc, both through kernel
/// `scale` launched from `launch` in lifecycle.c) run with `suppressions`.
fn run_suppressed(suppressions: &str) -> (Option<i32>, Report) {
    let dir = scratch("suppressed");
    let file = dir.join("s.supp");
    std::fs::write(&file, suppressions).unwrap();
    let out = streamsan(&dir)
        .args(["run", "--quiet", "--suppressions"])
        .arg(&file)
        .arg("--report")
        .arg(dir.join("report.%p.json"))
        .arg("--")
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    let (path, report) = reports_in(&dir, "report.").into_iter().next().expect("a report");
    assert_matches_schema(&path);
    (out.status.code(), report)
}

fn kinds(report: &Report) -> Vec<&str> {
    report.races.iter().map(|r| r.kind.as_str()).collect()
}

#[test]
fn a_race_line_matches_kernels_and_frames_of_either_operation() {
    let (code, report) = run_suppressed("race:scale\n");
    assert_eq!(kinds(&report), Vec::<&str>::new());
    assert_eq!(report.summary.suppressed, 2);
    assert_eq!(code, Some(0), "nothing left to report");
    let (_, report) = run_suppressed("# the driver's own module matches frames too\nrace:lifecycle\n");
    assert_eq!(report.summary.suppressed, 2);
}

#[test]
fn a_kind_line_leaves_the_other_kinds() {
    let (code, report) = run_suppressed("use-before-alloc:^launch$\n");
    assert_eq!(kinds(&report), ["cross-stream-race"]);
    assert_eq!(report.summary.suppressed, 1);
    assert_eq!(code, Some(66));
}

#[test]
fn race_top_looks_at_the_program_frame_only() {
    let (_, report) = run_suppressed("race_top:lifecycle.c\n");
    assert_eq!(report.summary.suppressed, 2, "main in lifecycle.c is where both are issued");
    let (_, report) = run_suppressed("race_top:libc.so\n");
    assert_eq!(report.summary.suppressed, 0, "libc is on the stacks, not at their tops");
    let (_, report) = run_suppressed("race:libc.so\n");
    assert_eq!(report.summary.suppressed, 2, "...which race: lines see");
}

#[test]
fn a_bad_line_stops_the_run_before_the_program_starts() {
    let dir = scratch("bad-suppressions");
    let file = dir.join("s.supp");
    std::fs::write(&file, "race:scale\nrace_bottom:x\n").unwrap();
    let out = streamsan(&dir)
        .args(["run", "--suppressions"])
        .arg(&file)
        .arg("--")
        .arg(lifecycle())
        .arg("races")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:2: unknown type \"race_bottom\"", file.display())), "{stderr}");
    assert!(calls(&dir).is_empty(), "the program did not run");
}

#[test]
fn a_kernel_matches_by_its_mangled_symbol_too() {
    // As cuobjdump and nsys name it: `_Z5scalePfPKfi` is `scale(float*, float const*, int)`.
    let (code, report) = run_suppressed("race:_Z5scalePfPKfi\n");
    assert_eq!(kinds(&report), Vec::<&str>::new());
    assert_eq!(report.summary.suppressed, 2);
    assert_eq!(code, Some(0));
    let (_, report) = run_suppressed("cross-stream-race:^_Z5scale*\n");
    assert_eq!(kinds(&report), ["use-before-alloc"]);
}
