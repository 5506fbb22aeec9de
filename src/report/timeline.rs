//! A report as a trace in the Chrome trace-event format, for Perfetto and `chrome://tracing`
//! (`docs/timeline.md`): each race a process, a track per host thread and per stream, its
//! operations as slices in issue order, the missing wait as a flow arrow.

use serde_json::{json, Value};

use super::text::{describe_site, missing_wait};
use super::{Frame, OpReport, Operation, RaceReport, Report};

/// Microseconds given to each operation. A report holds no times, only the order in which
/// the program issued the operations: slices are laid out in that order, one per slot.
const SLOT: u64 = 10;
/// The host's call that issues an operation to a stream, at the start of its slot.
const CALL: u64 = 2;
/// The gap at the end of a slot, so that neighbouring slices do not touch.
const GAP: u64 = 2;

/// Chrome's colour for the two racing operations (`chrome://tracing`; Perfetto picks its own).
const RACE_COLOUR: &str = "terrible";

/// The trace of a (merged) report.
pub fn trace(report: &Report) -> Value {
    let mut events = Vec::new();
    for (index, race) in report.races.iter().enumerate() {
        race_events(&mut events, index as u64 + 1, race);
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "tool": "streamsan",
            "version": report.version,
            "command": report.command.join(" "),
            "clock": "logical: operations in the order the program issued them, not as timed",
        },
    })
}

/// A track of a race's process: a host thread (by streamsan's number) or a stream (by label).
#[derive(Clone, PartialEq)]
enum Track {
    Thread(u32, Option<u32>),
    Stream(String),
}

impl Track {
    fn name(&self) -> String {
        match self {
            Track::Thread(id, Some(tid)) => format!("host thread T{id} (tid {tid})"),
            Track::Thread(id, None) => format!("host thread T{id}"),
            Track::Stream(label) => label.clone(),
        }
    }
}

/// Whether an operation ran on a stream rather than on the host itself (a host access, a
/// synchronous allocation or free).
fn on_a_stream(op: &OpReport) -> bool {
    op.stream.kind != "host"
}

fn thread_track(op: &OpReport) -> Track {
    Track::Thread(op.thread.id, op.thread.tid)
}

/// The track a label of the missing wait names for an operation: its stream's, or else the
/// host thread that issued it (`the host`).
fn track_named(label: &str, op: &OpReport) -> Track {
    if on_a_stream(op) && op.stream.label == label {
        Track::Stream(label.to_string())
    } else {
        thread_track(op)
    }
}

/// One operation's place: its slot, and the slice that stands for it on its own track.
struct Placed<'a> {
    op: &'a OpReport,
    role: &'static str,
    track: Track,
    ts: u64,
    dur: u64,
}

fn race_events(events: &mut Vec<Value>, pid: u64, race: &RaceReport) {
    let allocation = &race.buffer.allocation;
    let mut ops = Vec::new();
    // A use-before-alloc's first operation is the allocation itself.
    if allocation != &race.first && allocation != &race.second {
        ops.push((allocation, "allocation"));
    }
    ops.push((&race.first, Operation::First.as_str()));
    ops.push((&race.second, Operation::Second.as_str()));

    // Host threads first, by number, then streams as the race met them.
    let mut tracks: Vec<Track> = Vec::new();
    let mut threads: Vec<&OpReport> = ops.iter().map(|(op, _)| *op).collect();
    threads.sort_by_key(|op| op.thread.id);
    let streams = ops.iter().filter(|(op, _)| on_a_stream(op)).map(|(op, _)| Track::Stream(op.stream.label.clone()));
    for track in threads.into_iter().map(thread_track).chain(streams) {
        if !tracks.contains(&track) {
            tracks.push(track);
        }
    }
    let tid = |track: &Track| tracks.iter().position(|t| t == track).unwrap() as u64 + 1;

    let hazard = race.hazard.map(|h| format!(" ({h})")).unwrap_or_default();
    let title = format!("race {pid}: {}{hazard} on buffer {}", race.kind, race.buffer.address);
    events.push(metadata("process_name", pid, 0, json!({ "name": title })));
    events.push(metadata("process_sort_index", pid, 0, json!({ "sort_index": pid })));
    for track in &tracks {
        events.push(metadata("thread_name", pid, tid(track), json!({ "name": track.name() })));
        events.push(metadata("thread_sort_index", pid, tid(track), json!({ "sort_index": tid(track) })));
    }

    let wait = missing_wait(race);
    let mut placed = Vec::new();
    for (slot, (op, role)) in ops.into_iter().enumerate() {
        let start = slot as u64 * SLOT;
        let racing = role != "allocation";
        let mut args = op_args(op, role);
        if role == Operation::Second.as_str() {
            args["missing wait"] = json!(wait);
        }
        let (track, ts, dur) = if on_a_stream(op) {
            // The host's call that issued it, then the operation on its stream.
            events.push(slice(&op.api, pid, tid(&thread_track(op)), start, CALL, args.clone(), None));
            (Track::Stream(op.stream.label.clone()), start + CALL, SLOT - CALL - GAP)
        } else {
            (thread_track(op), start, SLOT - GAP)
        };
        let what = op.kernel.as_deref().unwrap_or(&op.api);
        let name = if racing { format!("{what} [{role} access, {}]", op.access) } else { format!("{what} [{role}]") };
        let colour = racing.then_some(RACE_COLOUR);
        events.push(slice(&name, pid, tid(&track), ts, dur, args, colour));
        placed.push(Placed { op, role, track, ts, dur });
    }

    let find = |which: Operation| placed.iter().find(|p| p.role == which.as_str()).expect("both operations placed");
    let second = find(Operation::Second);
    events.push(json!({
        "name": format!("{}{hazard}", race.kind),
        "cat": "race",
        "ph": "i",
        "s": "t",
        "ts": second.ts,
        "pid": pid,
        "tid": tid(&second.track),
        "args": { "missing wait": wait },
    }));

    // The arrow: from the end of the operation after which the event should be recorded, to
    // the start of the one before which the stream (or the host) should wait on it.
    let fix = &race.missing_wait;
    let (after, before) = (find(fix.after), find(fix.before));
    let (from, to) = (track_named(&fix.record_on, after.op), track_named(&fix.wait_on, before.op));
    let (from_ts, to_ts) = (slice_on(after, &from), slice_on(before, &to));
    let arrow = |ph: &str, ts: u64, track: &Track| {
        json!({
            "name": "missing wait",
            "cat": "missing-wait",
            "ph": ph,
            "id": pid,
            "ts": ts,
            "pid": pid,
            "tid": tid(track),
            "args": { "missing wait": wait },
        })
    };
    events.push(arrow("s", from_ts.1 - 1, &from));
    let mut end = arrow("f", to_ts.0, &to);
    end["bp"] = json!("e");
    events.push(end);
}

/// The start and end of an operation's slice on a track: its own slice, or the host's call
/// that issued it.
fn slice_on(which: &Placed, track: &Track) -> (u64, u64) {
    if &which.track == track {
        (which.ts, which.ts + which.dur)
    } else {
        let start = which.ts - CALL;
        (start, start + CALL)
    }
}

fn metadata(name: &str, pid: u64, tid: u64, args: Value) -> Value {
    json!({ "name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args })
}

fn slice(name: &str, pid: u64, tid: u64, ts: u64, dur: u64, args: Value, colour: Option<&str>) -> Value {
    let mut event = json!({ "name": name, "cat": "operation", "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args });
    if let Some(colour) = colour {
        event["cname"] = json!(colour);
    }
    event
}

/// What a slice's details pane shows of an operation: what it did and where it was called.
fn op_args(op: &OpReport, role: &str) -> Value {
    let mut args = json!({
        "operation": role,
        "api": op.api,
        "access": op.access.as_str(),
        "stream": op.stream.label,
        "thread": format!("T{}", op.thread.id),
        "call site": describe_site(&op.site),
        "stack": op.site.iter().map(frame_line).collect::<Vec<_>>(),
    });
    if let Some(kernel) = &op.kernel {
        args["kernel"] = json!(kernel);
    }
    if let Some(range) = &op.range {
        args["range"] = json!(format!("[{}, {})", range.start, range.end));
    }
    args
}

fn frame_line(frame: &Frame) -> String {
    let function = frame.function.as_deref().unwrap_or("<unknown>");
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => format!("{function} at {file}:{line}"),
        (Some(file), None) => format!("{function} at {file}"),
        _ => format!("{function} ({})", frame.module.as_deref().unwrap_or(&frame.address)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;

    fn examples() -> Vec<(String, Report)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/examples");
        let mut reports: Vec<(String, Report)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), Report::read_from(&p).unwrap()))
            .collect();
        reports.sort_by(|a, b| a.0.cmp(&b.0));
        reports
    }

    fn events(report: &Report) -> Vec<Value> {
        trace(report)["traceEvents"].as_array().unwrap().clone()
    }

    /// The format's required fields: every event has a name, a phase, a time, a process and a
    /// thread; a complete event (`X`) a duration too.
    #[test]
    fn every_event_has_the_fields_the_format_requires() {
        for (name, report) in examples() {
            for event in events(&report) {
                assert!(event["name"].is_string(), "{name}: {event}");
                assert!(event["ph"].is_string(), "{name}: {event}");
                for field in ["ts", "pid", "tid"] {
                    assert!(event[field].is_u64(), "{name}: {field} in {event}");
                }
                if event["ph"] == "X" {
                    assert!(event["dur"].is_u64(), "{name}: {event}");
                }
            }
        }
    }

    /// The track names of a trace, by process and thread.
    fn track_names(events: &[Value]) -> HashMap<(u64, u64), String> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| {
                let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                (key, e["args"]["name"].as_str().unwrap().to_string())
            })
            .collect()
    }

    /// The slice of a process's track that holds a time.
    fn slice_at(events: &[Value], pid: u64, tid: u64, ts: u64) -> &Value {
        let mut found = events.iter().filter(|e| {
            let start = e["ts"].as_u64().unwrap();
            e["ph"] == "X"
                && e["pid"] == pid
                && e["tid"] == tid
                && start <= ts
                && ts < start + e["dur"].as_u64().unwrap()
        });
        let slice = found.next().unwrap_or_else(|| panic!("no slice at {ts} on {pid}/{tid}"));
        assert!(found.next().is_none(), "slices overlap at {ts} on {pid}/{tid}");
        slice
    }

    /// The track a label of the missing wait stands for: the stream of that label, or the
    /// host thread that issued the operation.
    fn expected_track(label: &str, op: &OpReport) -> String {
        if op.stream.kind != "host" && op.stream.label == label {
            label.to_string()
        } else {
            Track::Thread(op.thread.id, op.thread.tid).name()
        }
    }

    /// Each race's arrow starts inside the slice of the operation after which the event should
    /// be recorded, on the stream to record it on, and ends at the start of the operation the
    /// stream (or the host) should wait before; the two racing operations are marked.
    #[test]
    fn arrows_join_the_operations_the_missing_wait_names() {
        let mut arrows = 0;
        for (name, report) in examples() {
            let events = events(&report);
            let tracks = track_names(&events);
            for (index, race) in report.races.iter().enumerate() {
                let pid = index as u64 + 1;
                let op = |which: Operation| if which == Operation::First { &race.first } else { &race.second };
                let flow = |ph: &str| {
                    let mut ends = events.iter().filter(|e| e["ph"] == ph && e["pid"] == pid);
                    let end = ends.next().unwrap_or_else(|| panic!("{name}: no {ph} in race {pid}"));
                    assert!(ends.next().is_none(), "{name}: one arrow per race");
                    assert_eq!(end["id"], pid, "{name}");
                    end
                };
                let (start, end) = (flow("s"), flow("f"));
                assert_eq!(start["cat"], end["cat"]);
                assert_eq!(end["bp"], "e", "{name}: the arrow ends at the slice its time opens");
                let fix = &race.missing_wait;
                for (arrow, which, label) in [(start, fix.after, &fix.record_on), (end, fix.before, &fix.wait_on)] {
                    let tid = arrow["tid"].as_u64().unwrap();
                    let slice = slice_at(&events, pid, tid, arrow["ts"].as_u64().unwrap());
                    assert_eq!(slice["args"]["operation"], which.as_str(), "{name}: {arrow}");
                    assert_eq!(tracks[&(pid, tid)], expected_track(label, op(which)), "{name}: {arrow}");
                }
                let waiting = slice_at(&events, pid, end["tid"].as_u64().unwrap(), end["ts"].as_u64().unwrap());
                assert_eq!(end["ts"], waiting["ts"], "{name}: the arrow ends where the waiting slice starts");
                let marked: Vec<&Value> = events
                    .iter()
                    .filter(|e| e["pid"] == pid && e["cname"] == RACE_COLOUR)
                    .map(|e| &e["args"]["operation"])
                    .collect();
                assert_eq!(marked, [&json!("first"), &json!("second")], "{name}");
                arrows += 1;
            }
        }
        assert!(arrows >= 8, "the examples' races: {arrows}");
    }

    /// A cross-stream race: the arrow goes from the first stream to the second; a free on
    /// the host that raced with a copy: from the copy's stream to the host thread.
    #[test]
    fn arrows_go_from_stream_to_stream_or_to_the_host() {
        let ends = |file: &str| {
            let report = &examples().into_iter().find(|(n, _)| n == file).unwrap().1;
            let events = events(report);
            let tracks = track_names(&events);
            let track = |ph: &str| {
                let e = events.iter().find(|e| e["ph"] == ph).unwrap();
                tracks[&(e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())].clone()
            };
            (track("s"), track("f"))
        };
        assert_eq!(
            ends("cross-stream-raw.json"),
            ("stream 0x5eed00000040 (non-blocking)".into(), "stream 0x5eed00000050 (non-blocking)".into())
        );
        assert_eq!(
            ends("free-race-on-another-device.json"),
            ("stream 0x5eed00000040 (non-blocking)".into(), "host thread T1 (tid 28587)".into())
        );
    }
}
