//! `streamsan report`: reports rendered as text, merged, filtered, suppressed; its exit
//! status; and what it says of a file that is not a report.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

/// The report of `lifecycle MODE` under streamsan.
fn report_of(mode: &str) -> PathBuf {
    let dir = scratch(&format!("report-of-{mode}"));
    streamsan(&dir)
        .args(["run", "--quiet", "--report"])
        .arg(dir.join("report.%p.json"))
        .arg("--")
        .arg(lifecycle())
        .arg(mode)
        .output()
        .unwrap();
    reports_in(&dir, "report.").into_iter().next().expect("a report").0
}

fn report(args: &[&str], files: &[&Path]) -> Output {
    let dir = scratch("report-command");
    streamsan(&dir).arg("report").args(args).args(files).output().unwrap()
}

#[test]
fn a_report_is_rendered_and_fails_while_races_remain() {
    let racy = report_of("races");
    let out = report(&[], &[&racy]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("WARNING: streamsan:").count(), 2, "{stdout}");
    assert!(stdout.ends_with("streamsan: 2 races (1 cross-stream-race, 1 use-before-alloc)\n"), "{stdout}");
    let clean = report(&[], &[&report_of("clean")]);
    assert_eq!(clean.status.code(), Some(0));
    // The one note: no Compute Sanitizer library here, so kernels stood on their parameters.
    let clean = text(&clean.stdout);
    assert!(clean.ends_with("streamsan: no race\n"), "{clean}");
    assert!(clean.lines().rev().skip(1).all(|l| l.starts_with("NOTE: streamsan: footprint-unavailable: ")), "{clean}");
}

#[test]
fn reports_merge_and_filter() {
    let racy = report_of("races");
    let out = report(&["--format", "json"], &[&racy, &racy]);
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let races = merged["races"].as_array().unwrap();
    assert_eq!(races.len(), 2, "the same races, once each");
    assert!(races.iter().all(|r| r["count"] == 2), "counted twice: {races:?}");
    let dir = scratch("merged-schema");
    std::fs::write(dir.join("merged.json"), &out.stdout).unwrap();
    assert_matches_schema(&dir.join("merged.json"));
    let only = report(&["--kind", "use-before-alloc"], &[&racy]);
    let stdout = text(&only.stdout);
    assert_eq!(stdout.matches("WARNING: streamsan: use-before-alloc").count(), 1);
    assert!(!stdout.contains("cross-stream-race ("), "{stdout}");
}

#[test]
fn suppressions_apply_to_reports_too() {
    let racy = report_of("races");
    let dir = scratch("report-suppressions");
    let file = dir.join("s.supp");
    std::fs::write(&file, "use-before-alloc:lifecycle.c\n").unwrap();
    let out = report(&["--suppressions", file.to_str().unwrap()], &[&racy]);
    assert!(
        text(&out.stdout).ends_with("streamsan: 1 race (1 cross-stream-race), 1 suppressed\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn what_is_not_a_report_is_an_error_not_a_crash() {
    let racy = report_of("races");
    let dir = scratch("not-reports");
    let whole = std::fs::read(&racy).unwrap();
    let truncated = dir.join("truncated.json");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    let other = dir.join("other.json");
    std::fs::write(&other, r#"{"tool": "tsan", "version": "1", "pid": 1, "command": []}"#).unwrap();
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, [0xff, 0xfe, 0x00]).unwrap();
    let text_of_racy = std::fs::read_to_string(&racy).unwrap();
    let newer = dir.join("newer.json");
    std::fs::write(&newer, text_of_racy.replacen("\"pid\"", "\"schema\": 2, \"pid\"", 1)).unwrap();
    let new_kind = dir.join("new-kind.json");
    std::fs::write(&new_kind, text_of_racy.replacen("\"cross-stream-race\"", "\"tensor-race\"", 1)).unwrap();
    let zero = std::path::PathBuf::from("/dev/zero");
    for (file, says) in [
        (&truncated, "not a streamsan report"),
        (&other, "tool \"tsan\""),
        (&garbage, "not a streamsan report"),
        (&dir.join("missing.json"), "No such file"),
        (&newer, "written by a newer streamsan"),
        (&new_kind, "a race of kind \"tensor-race\", unknown to streamsan"),
        (&zero, "not a streamsan report"),
    ] {
        let out = report(&[], &[file.as_path()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", file.display());
        assert!(stderr.starts_with(&format!("streamsan: {}:", file.display())), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let help = report(&["--help"], &[]);
    assert!(text(&help.stdout).contains("2 when a report cannot be read"), "exit 2 is documented");
    let out = report(&["--kind", "data-race"], &[&racy]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown race kind \"data-race\""));
}

#[test]
fn options_come_anywhere_on_the_command_line() {
    let racy = report_of("races");
    let dir = scratch("report-options-after");
    let file = dir.join("s.supp");
    std::fs::write(&file, "use-before-alloc:lifecycle.c\n").unwrap();
    // After the file, as people type them.
    let out = report(&[], &[&racy, Path::new("--suppressions"), &file]);
    assert!(
        text(&out.stdout).ends_with("streamsan: 1 race (1 cross-stream-race), 1 suppressed\n"),
        "{}",
        text(&out.stderr)
    );
    let out = report(&[], &[&racy, Path::new("--kind"), Path::new("use-before-alloc")]);
    assert_eq!(text(&out.stdout).matches("WARNING: streamsan:").count(), 1, "{}", text(&out.stderr));
    // After `--`, a name is a file's, even one that looks like a flag.
    let out = report(&["--"], &[Path::new("--kind")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--kind: No such file"), "{}", text(&out.stderr));
}

/// `--format json` of one report writes it back as it was: its version, its schema and the
/// fields this streamsan does not know.
#[test]
fn one_report_round_trips_through_format_json() {
    let racy = report_of("races");
    let dir = scratch("round-trip");
    let mut file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&racy).unwrap()).unwrap();
    file["version"] = "0.0.1".into();
    file["gpu"] = serde_json::json!({"name": "H200"});
    let edited = dir.join("edited.json");
    std::fs::write(&edited, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    let out = report(&["--format", "json"], &[&edited]);
    let written: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(written["version"], "0.0.1");
    assert_eq!(written["gpu"]["name"], "H200");
    assert_eq!(written["schema"], 1);
    assert_eq!(written["races"], file["races"]);
    assert_eq!(written["pid"], file["pid"]);
}
