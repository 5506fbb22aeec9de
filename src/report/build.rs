//! From what the model found to the report document: streams and kernels named, call sites
//! symbolized, accesses and the missing wait as data. The words are [`super::text`]'s.

use crate::model::buffers::MemoryKind;
use crate::model::clock::{Epoch, Slot, HOST};
use crate::model::op::{Mode, OpRecord, StackId, ThreadId};
use crate::model::race::{Action, Note, RaceEntry, RaceKind, Side};
use crate::model::streams::SlotOwner;
use crate::model::Model;

use super::text::{graph_lane_label, note_message, stream_label, FORGOTTEN_LABEL, HOST_LABEL};
use super::{
    AccessKind, BufferReport, ByteRange, Fix, FixAction, Frame, GraphLaunch, NoteReport, OpReport, Operation,
    RaceReport, Report, StreamReport, ThreadReport,
};

/// What a report needs from the process it describes.
pub trait Symbols {
    /// The frames of a call site, innermost first.
    fn frames(&self, site: StackId) -> Vec<Frame>;
    /// The operating system's id of a thread.
    fn tid(&self, thread: ThreadId) -> Option<u32>;
    /// The test running when the call at a call site was made.
    fn test(&self, site: StackId) -> Option<String>;
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// The stream (or host, or graph lane) a slot belongs to.
pub fn stream(model: &Model, epoch: Epoch, symbols: &dyn Symbols) -> StreamReport {
    match model.slot_owner(epoch) {
        SlotOwner::Host => StreamReport {
            label: HOST_LABEL.into(),
            handle: hex(0),
            kind: "host".into(),
            context: hex(0),
            created_at: Vec::new(),
            graph: None,
        },
        SlotOwner::Stream { handle, ctx, kind, created_at, thread } => StreamReport {
            label: stream_label(kind, handle, ctx, thread),
            handle: hex(handle),
            kind: kind.label().into(),
            context: hex(ctx),
            created_at: if created_at.0 == 0 { Vec::new() } else { symbols.frames(created_at) },
            graph: None,
        },
        SlotOwner::Forgotten => StreamReport {
            label: FORGOTTEN_LABEL.into(),
            handle: hex(0),
            kind: "forgotten".into(),
            context: hex(0),
            created_at: Vec::new(),
            graph: None,
        },
        SlotOwner::Peer(peer) => StreamReport {
            label: peer.label,
            handle: hex(peer.handle),
            kind: peer.kind,
            context: hex(peer.ctx),
            created_at: Vec::new(),
            graph: None,
        },
        SlotOwner::GraphLane { exec, launch } => {
            let launched = stream(model, launch, symbols);
            StreamReport {
                label: graph_lane_label(exec, &launched.label),
                handle: launched.handle,
                kind: "graph".into(),
                context: launched.context,
                created_at: Vec::new(),
                graph: Some(GraphLaunch { exec: hex(exec), launched_on: launched.label }),
            }
        }
    }
}

/// One operation; its byte range as offsets from `start` (0: as addresses).
fn op(model: &Model, record: &OpRecord, action: Action, start: u64, symbols: &dyn Symbols) -> OpReport {
    let (access, range) = match action {
        Action::Alloc => (AccessKind::Alloc, None),
        Action::Free => (AccessKind::Free, None),
        Action::Access { mode, lo, hi } => {
            let access = match mode {
                Mode::Read => AccessKind::Read,
                Mode::Write => AccessKind::Write,
                Mode::ReadWrite => AccessKind::ReadWrite,
                Mode::Unknown => AccessKind::ReadOrWrite,
                Mode::Atomic => AccessKind::Atomic,
            };
            (access, Some(ByteRange { start: hex(lo.saturating_sub(start)), end: hex(hi.saturating_sub(start)) }))
        }
    };
    let kernel = record.kernel.map(|k| model.kernel_name(k));
    // Another process's operation: its thread is numbered there.
    let peer = match model.slot_owner(record.epoch) {
        SlotOwner::Peer(peer) => Some(peer.pid),
        _ => None,
    };
    OpReport {
        api: record.api.to_string(),
        kernel_symbol: record
            .kernel
            .map(|k| model.kernel_symbol(k))
            .filter(|symbol| *symbol != kernel.as_deref().unwrap_or_default()),
        kernel,
        access,
        range,
        stream: stream(model, record.epoch, symbols),
        thread: ThreadReport {
            id: record.thread.0,
            tid: if peer.is_some() { None } else { symbols.tid(record.thread) },
        },
        site: symbols.frames(record.site),
        test: symbols.test(record.site),
        pid: peer,
    }
}

/// The missing wait between the two operations of a race.
fn fix(kind: RaceKind, first: &OpReport, second: &OpReport, slots: (Slot, Slot)) -> Fix {
    let (s1, s2) = (&first.stream.label, &second.stream.label);
    let (first_slot, second_slot) = slots;
    // Two accesses on one stream race only when the second overlaps the first: a
    // programmatic launch that never waits on its grid dependencies.
    if kind == RaceKind::CrossStream && first_slot == second_slot && second_slot != HOST {
        return Fix {
            action: FixAction::GridDependencyWait,
            record_on: s1.clone(),
            after: Operation::First,
            wait_on: s2.clone(),
            before: Operation::Second,
        };
    }
    if kind == RaceKind::UseAfterFree {
        return Fix {
            action: FixAction::FreeAfterUse,
            record_on: s2.clone(),
            after: Operation::Second,
            wait_on: s1.clone(),
            before: Operation::First,
        };
    }
    // Across processes, only an IPC event orders the two.
    if first.pid.is_some() || second.pid.is_some() {
        return Fix {
            action: FixAction::IpcEvent,
            record_on: s1.clone(),
            after: Operation::First,
            wait_on: s2.clone(),
            before: Operation::Second,
        };
    }
    if second_slot == HOST {
        return Fix {
            action: FixAction::HostWaits,
            record_on: s1.clone(),
            after: Operation::First,
            wait_on: HOST_LABEL.into(),
            before: Operation::Second,
        };
    }
    Fix {
        action: FixAction::RecordAndWait,
        record_on: s1.clone(),
        after: Operation::First,
        wait_on: s2.clone(),
        before: Operation::Second,
    }
}

/// One race of the report. An array has no address: its handle names it, and the bytes an
/// operation touched are offsets from its start.
pub fn race(model: &Model, entry: &RaceEntry, symbols: &dyn Symbols) -> RaceReport {
    let race = &entry.race;
    let (address, start) = match race.buffer.kind {
        MemoryKind::Array => (race.buffer.handle, race.buffer.base),
        _ => (race.buffer.base, 0),
    };
    let side = |side: &Side| op(model, &side.op, side.action, start, symbols);
    let mut first = side(&race.first);
    let mut second = side(&race.second);
    // A race across processes names the process of each side.
    if first.pid.is_some() || second.pid.is_some() {
        let me = std::process::id();
        first.pid.get_or_insert(me);
        second.pid.get_or_insert(me);
    }
    let missing_wait = fix(race.kind, &first, &second, (race.first.op.epoch.slot, race.second.op.epoch.slot));
    RaceReport {
        kind: race.kind,
        hazard: race.hazard,
        count: entry.count,
        buffer: BufferReport {
            address: hex(address),
            size: race.buffer.size,
            kind: race.buffer.kind.label().into(),
            allocation: op(model, &race.buffer.alloc, Action::Alloc, start, symbols),
        },
        first,
        second,
        missing_wait,
    }
}

fn note(model: &Model, note: &Note, symbols: &dyn Symbols) -> NoteReport {
    let on = stream(model, note.op.epoch, symbols).label;
    let kernel = note.op.kernel.map(|k| model.kernel_name(k));
    let message = note_message(note.kind, note.op.api, &on, kernel.as_deref(), note.subject);
    NoteReport {
        kind: note.kind,
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
