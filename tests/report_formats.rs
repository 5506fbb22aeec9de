//! `streamsan report`'s other outputs: SARIF for code scanning, a timeline for trace viewers.

use std::path::{Path, PathBuf};

use crate::common::*;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/examples").join(name)
}

#[test]
fn sarif_has_one_result_per_race_and_keeps_the_exit_status() {
    let dir = scratch("report-sarif");
    let out = streamsan(&dir)
        .args(["report", "--format", "sarif"])
        .arg(example("use-before-alloc.json"))
        .arg(example("free-race.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(log["version"], "2.1.0");
    let mut rules: Vec<&str> =
        log["runs"][0]["results"].as_array().unwrap().iter().map(|r| r["ruleId"].as_str().unwrap()).collect();
    rules.sort();
    assert_eq!(rules, ["cross-stream-race", "free-race", "use-before-alloc"]);
}

#[test]
fn a_timeline_is_written_beside_the_listing() {
    let dir = scratch("report-timeline");
    let trace = dir.join("races.trace.json");
    let out = streamsan(&dir)
        .args(["report", "--timeline"])
        .arg(&trace)
        .arg(example("cross-stream-raw.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("WARNING: streamsan: cross-stream-race"), "the listing as usual");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).expect("JSON");
    let events = trace["traceEvents"].as_array().unwrap();
    let phases = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((phases("s"), phases("f")), (1, 1), "one arrow for the one race");
    assert!(phases("X") >= 3, "the allocation, the two launches and their calls");
    let missing = dir.join("no-such-dir/t.json");
    let out = streamsan(&dir).args(["report", "--timeline"]).arg(&missing).arg(example("clean.json")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot write the timeline"), "{}", text(&out.stderr));
}
