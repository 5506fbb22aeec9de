//! From what the model found to the report document: names for streams and kernels,
//! symbolized call sites, and the missing wait in words and as data.

use crate::model::clock::{Slot, HOST};
use crate::model::op::{Mode, OpRecord, StackId, ThreadId};
use crate::model::race::{Action, Note, NoteKind, RaceEntry, RaceKind, Side};
use crate::model::streams::{SlotOwner, StreamKind};
use crate::model::Model;

use super::{BufferReport, ByteRange, Fix, Frame, GraphLaunch, NoteReport, OpReport, RaceReport, Report, StreamReport, ThreadReport};

/// What a report needs from the process it describes.
pub trait Symbols {
    /// The frames of a call site, innermost first.
    fn frames(&self, site: StackId) -> Vec<Frame>;
    /// The operating system's id of a thread.
    fn tid(&self, thread: ThreadId) -> Option<u32>;
}

/// No symbols: for tests and for reports built away from the process.
pub struct NoSymbols;

impl Symbols for NoSymbols {
    fn frames(&self, _: StackId) -> Vec<Frame> {
        Vec::new()
    }
    fn tid(&self, _: ThreadId) -> Option<u32> {
        None
    }
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// The stream (or host, or graph lane) a slot belongs to.
pub fn stream(model: &Model, slot: Slot, symbols: &dyn Symbols) -> StreamReport {
    match model.slot_owner(slot) {
        SlotOwner::Host => StreamReport {
            label: "the host".into(),
            handle: hex(0),
            kind: "host".into(),
            context: hex(0),
            created_at: Vec::new(),
            graph: None,
        },
        SlotOwner::Stream { handle, ctx, kind, created_at, thread } => {
            let label = match kind {
                StreamKind::LegacyDefault => format!("the legacy default stream (context {ctx:#x})"),
                StreamKind::PerThreadDefault => {
                    format!("the per-thread default stream of thread T{} (context {ctx:#x})", thread.0)
                }
                StreamKind::Blocking | StreamKind::NonBlocking => format!("stream {handle:#x} ({})", kind.label()),
            };
            StreamReport {
                label,
                handle: hex(handle),
                kind: kind.label().into(),
                context: hex(ctx),
                created_at: if created_at.0 == 0 { Vec::new() } else { symbols.frames(created_at) },
                graph: None,
            }
        }
        SlotOwner::GraphLane { exec, launch_slot } => {
            let launched = stream(model, launch_slot, symbols);
            StreamReport {
                label: format!("a node of graph {exec:#x} launched on {}", launched.label),
                handle: launched.handle,
                kind: "graph".into(),
                context: launched.context,
                created_at: Vec::new(),
                graph: Some(GraphLaunch { exec: hex(exec), launched_on: launched.label }),
            }
        }
    }
}

fn op(model: &Model, record: &OpRecord, action: Action, symbols: &dyn Symbols) -> OpReport {
    let (access, range) = match action {
        Action::Alloc => ("alloc", None),
        Action::Free => ("free", None),
        Action::Access { mode, lo, hi } => {
            let access = match mode {
                Mode::Read => "read",
                Mode::Write => "write",
                Mode::ReadWrite => "read-write",
                Mode::Unknown => "read-or-write",
            };
            (access, Some(ByteRange { start: hex(lo), end: hex(hi) }))
        }
    };
    OpReport {
        api: record.api.to_string(),
        kernel: record.kernel.map(|k| model.kernel_name(k)),
        access: access.into(),
        range,
        stream: stream(model, record.epoch.slot, symbols),
        thread: ThreadReport { id: record.thread.0, tid: symbols.tid(record.thread) },
        site: symbols.frames(record.site),
    }
}

/// How a person names an operation: its kernel or entry point, and where it was called.
pub fn describe(op: &OpReport) -> String {
    let what = match &op.kernel {
        Some(kernel) => format!("{kernel} ({})", op.api),
        None => op.api.clone(),
    };
    match super::program_frame(&op.site) {
        Some(Frame { file: Some(file), line, .. }) => {
            let file = file.rsplit('/').next().unwrap_or(file);
            match line {
                Some(line) => format!("{what} at {file}:{line}"),
                None => format!("{what} at {file}"),
            }
        }
        _ => what,
    }
}

/// The missing wait between the two operations of a race.
fn fix(kind: RaceKind, first: &OpReport, second: &OpReport, second_slot: Slot) -> Fix {
    let (a, b) = (describe(first), describe(second));
    let (s1, s2) = (&first.stream.label, &second.stream.label);
    if kind == RaceKind::UseAfterFree {
        return Fix {
            text: format!(
                "{b} uses the buffer after {a} freed it: free it after its last use instead (record an event on {s2} after {b}; make {s1} wait on it before the free)"
            ),
            action: "free-after-use".into(),
            record_on: s2.clone(),
            after: "second".into(),
            wait_on: s1.clone(),
            before: "first".into(),
        };
    }
    if second_slot == HOST {
        return Fix {
            text: format!(
                "make the host wait for {s1} after {a} (cuStreamSynchronize, or cuEventSynchronize on an event recorded after it) before {b}"
            ),
            action: "host-waits".into(),
            record_on: s1.clone(),
            after: "first".into(),
            wait_on: "the host".into(),
            before: "second".into(),
        };
    }
    Fix {
        text: format!("record an event on {s1} after {a}; make {s2} wait on it before {b}"),
        action: "record-and-wait".into(),
        record_on: s1.clone(),
        after: "first".into(),
        wait_on: s2.clone(),
        before: "second".into(),
    }
}

fn side(model: &Model, side: &Side, symbols: &dyn Symbols) -> OpReport {
    op(model, &side.op, side.action, symbols)
}

/// One race of the report.
pub fn race(model: &Model, entry: &RaceEntry, symbols: &dyn Symbols) -> RaceReport {
    let race = &entry.race;
    let first = side(model, &race.first, symbols);
    let second = side(model, &race.second, symbols);
    let missing_wait = fix(race.kind, &first, &second, race.second.op.epoch.slot);
    RaceReport {
        kind: race.kind.label().into(),
        hazard: race.hazard.map(|h| h.label().into()),
        count: entry.count,
        buffer: BufferReport {
            address: hex(race.buffer.base),
            size: race.buffer.size,
            kind: race.buffer.kind.label().into(),
            allocation: op(model, &race.buffer.alloc, Action::Alloc, symbols),
        },
        first,
        second,
        missing_wait,
    }
}

fn note(model: &Model, note: &Note, symbols: &dyn Symbols) -> NoteReport {
    let on = stream(model, note.op.epoch.slot, symbols).label;
    let message = match note.kind {
        NoteKind::WaitOnUnrecordedEvent => format!(
            "{} on {on} waits on event {:#x}, which was never recorded: the wait orders nothing",
            note.op.api, note.subject
        ),
        NoteKind::GraphNotFollowed => format!(
            "graph {:#x} launched on {on} was not captured through the hooked calls: its work is not checked",
            note.subject
        ),
        NoteKind::DestroyedWhilePending => {
            format!("{on} was destroyed while work on it may still run (the host had not synchronized with it)")
        }
        NoteKind::HostGuardGaveUp => format!(
            "the host touched other data on page {:#x}, which holds bytes of {} on {on} in flight: host races on that page went unchecked until the copy was done",
            note.subject, note.op.api
        ),
    };
    NoteReport {
        kind: note.kind.label().into(),
        message,
        count: note.count,
        api: note.op.api.into(),
        site: symbols.frames(note.op.site),
    }
}

/// Fills `report` with everything the model found so far.
pub fn fill(report: &mut Report, model: &Model, symbols: &dyn Symbols) {
    report.races = model.races().iter().map(|e| race(model, e, symbols)).collect();
    report.notes = model.notes().iter().map(|n| note(model, n, symbols)).collect();
    report.summarize();
}
