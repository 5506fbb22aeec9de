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
