//! The report document: its schema, and the examples in `docs/report/examples/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::*;
use streamsan::report::Report;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
}

#[test]
fn every_example_matches_the_schema() {
    for path in examples() {
        assert_matches_schema(&path);
    }
}

#[test]
fn the_examples_cover_every_kind_hazard_fix_and_note() {
    let (mut kinds, mut hazards, mut actions, mut notes) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for path in examples() {
        let report = Report::read_from(&path).unwrap();
        for race in &report.races {
            kinds.insert(race.kind.to_string());
            hazards.extend(race.hazard.map(|h| h.to_string()));
            actions.insert(race.missing_wait.action.to_string());
        }
        notes.extend(report.notes.iter().map(|n| n.kind.to_string()));
    }
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(kinds, set(&["cross-stream-race", "free-race", "use-after-free", "use-before-alloc"]));
    assert_eq!(hazards, set(&["RAW", "WAR", "WAW"]));
    assert_eq!(actions, set(&["free-after-use", "host-waits", "record-and-wait"]));
    assert_eq!(notes, set(&["destroyed-while-pending", "graph-not-followed", "wait-on-unrecorded-event"]));
}

#[test]
fn the_schema_rejects_a_report_that_breaks_it() {
    let dir = scratch("schema-negative");
    let mut document: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(examples().iter().find(|p| p.ends_with("free-race.json")).unwrap()).unwrap(),
    )
    .unwrap();
    document["races"][0]["kind"] = "data-race".into();
    let path = dir.join("broken.json");
    std::fs::write(&path, document.to_string()).unwrap();
    let result = std::panic::catch_unwind(|| assert_matches_schema(&path));
    assert!(result.is_err(), "a race of an unknown kind passed the schema");
}

#[test]
fn notes_are_not_races() {
    let run = run(&semantics(), &["notes", "racy"]);
    run.assert_ran();
    run.assert_reports_match_the_schema();
    let report = run.report();
    assert!(report.races.is_empty(), "{:?}", report.races);
    let kinds: BTreeSet<&str> = report.notes.iter().map(|n| n.kind.as_str()).collect();
    // No Compute Sanitizer library here: kernels stand on their parameters, said once.
    assert_eq!(kinds, BTreeSet::from(["destroyed-while-pending", "footprint-unavailable", "graph-not-followed"]));
    // A note is nothing the user must act on (NCCL waits on never-recorded events dozens of
    // times in a clean run): it is in the report, never on stderr.
    for kind in &kinds {
        assert!(!run.stderr().contains(kind), "note {kind} on stderr:\n{}", run.stderr());
    }
}
