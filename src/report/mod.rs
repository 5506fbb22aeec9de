//! The JSON report, one document per process (`docs/report/schema.json`): its data, read and
//! written with serde. Above the data: [`build`] (from the model), [`frames`] (the program's
//! frame of a call site), [`text`] (every word), [`merge`], [`suppressions`], [`sink`] (what
//! becomes of each race), [`file`](mod@file), [`read`] and [`run`] (report files, read race by
//! race, and a run's list of them), [`sarif`] and [`timeline`] (the same races for code
//! scanning and for trace viewers).

pub mod build;
pub mod file;
pub mod frames;
pub mod merge;
pub mod read;
pub mod run;
pub mod sarif;
pub mod sink;
pub mod suppressions;
pub mod text;
pub mod timeline;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::model::race::{Hazard, NoteKind, RaceKind};

/// The report schema this streamsan writes, and the newest it reads (`schema` in the file;
/// a file without one is schema 1).
pub const SCHEMA: u32 = 1;

/// One process's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always "streamsan".
    pub tool: String,
    /// The streamsan that wrote it.
    pub version: String,
    /// The report's schema ([`SCHEMA`]); 1 in files that do not say.
    #[serde(default = "first_schema")]
    pub schema: u32,
    pub pid: u32,
    /// The process's command line.
    pub command: Vec<String>,
    /// The races, one entry per pair of call sites.
    #[serde(default)]
    pub races: Vec<RaceReport>,
    #[serde(default)]
    pub summary: Summary,
    /// What is not a race but worth knowing.
    #[serde(default)]
    pub notes: Vec<NoteReport>,
    /// Calls intercepted, by exported driver name.
    #[serde(default)]
    pub intercepted: BTreeMap<String, u64>,
    /// Hooked names for which `cuGetProcAddress` returned a pointer streamsan could not
    /// place: the program calls those functions unseen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unrecognised_proc_addresses: BTreeMap<String, u64>,
    /// Fields this streamsan does not know (written by a newer one): kept, written back.
    #[serde(flatten)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

fn first_schema() -> u32 {
    1
}

/// Races by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Entries in `races`.
    pub races: u64,
    /// Occurrences, all entries together.
    pub occurrences: u64,
    /// Entries by race kind.
    pub by_kind: BTreeMap<RaceKind, u64>,
    /// Entries left out by suppressions.
    #[serde(default)]
    pub suppressed: u64,
}

/// One race: two operations on one buffer, the first not ordered before the second.
/// Written with the missing wait in words beside it (its `Serialize` impl, in `text.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct RaceReport {
    pub kind: RaceKind,
    /// For a cross-stream race and a host race.
    #[serde(default)]
    pub hazard: Option<Hazard>,
    /// How many times it occurred.
    pub count: u64,
    pub buffer: BufferReport,
    /// The earlier operation (in issue order).
    pub first: OpReport,
    /// The operation that exposed the race.
    pub second: OpReport,
    pub missing_wait: Fix,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferReport {
    /// The buffer's first byte, in hexadecimal; an array's handle (`CUarray`: it has no
    /// address, and the byte ranges of its operations are offsets from its start).
    pub address: String,
    pub size: u64,
    /// `device`, `stream-ordered`, `managed`, `pinned-host`, ..., `array`
    pub kind: String,
    pub allocation: OpReport,
}

/// One operation as the program issued it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// The driver entry point, e.g. `cuLaunchKernel_ptsz`; `host` for the host's own load or
    /// store (a host race, [`crate::model::host_races::HOST_API`]).
    pub api: String,
    /// The kernel, demangled, for a launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The kernel's symbol as the driver, `nsys` and `cuobjdump` name it (mangled), when it
    /// is not its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_symbol: Option<String>,
    pub access: AccessKind,
    /// The bytes accessed, for a read or a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ByteRange>,
    pub stream: StreamReport,
    pub thread: ThreadReport,
    /// The call site, innermost frame first.
    pub site: Vec<Frame>,
    /// The test the program said was running when it made the call (`streamsan_set_test`:
    /// the pytest plugin names each test by its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The process that made the call, in a race across processes (memory or events shared
    /// through CUDA IPC); absent when both operations are the report's process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteRange {
    pub start: String,
    pub end: String,
}

/// The stream an operation ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// How a person would name it, e.g. `stream 0x55d0c0 (non-blocking)`.
    pub label: String,
    /// The handle, in hexadecimal (`0x0` for default streams).
    pub handle: String,
    /// `legacy-default`, `per-thread-default`, `blocking`, `non-blocking`, `graph` or `host`.
    pub kind: String,
    pub context: String,
    /// Where the stream was created, when streamsan saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_at: Vec<Frame>,
    /// For a node of a graph launch: the executable graph and the stream it was launched on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphLaunch>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphLaunch {
    pub exec: String,
    pub launched_on: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// streamsan's number for the thread (T1, T2, ...).
    pub id: u32,
    /// The operating system's thread id, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
}

/// One stack frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

named_enum! {
    /// What an operation did to its buffer.
    pub enum AccessKind("access") {
        Alloc = "alloc",
        Free = "free",
        Read = "read",
        Write = "write",
        ReadWrite = "read-write",
        /// A launch's access whose direction is not known.
        ReadOrWrite = "read-or-write",
        /// A measured atomic read-modify-write.
        Atomic = "atomic",
    }
}

named_enum! {
    /// How to add the missing wait.
    pub enum FixAction("fix") {
        /// Record an event on `record_on` after `after`, make `wait_on` wait on it before
        /// `before`.
        RecordAndWait = "record-and-wait",
        /// Synchronize the host with `record_on` after `after`, before `before`.
        HostWaits = "host-waits",
        /// Move the free after the use.
        FreeAfterUse = "free-after-use",
        /// Record an IPC event (made with `CU_EVENT_INTERPROCESS`) on `record_on` after
        /// `after` in the first operation's process, and make `wait_on` wait on the event
        /// opened from its handle before `before` in the second's.
        IpcEvent = "ipc-event",
        /// Make `before`, a kernel launched with programmatic stream serialization on the
        /// stream of `after` (or a kernel node reached from it through a programmatic edge),
        /// wait on its grid dependencies before the access.
        GridDependencyWait = "grid-dependency-wait",
    }
}

named_enum! {
    /// One of the two operations of a race.
    pub enum Operation("operation") {
        First = "first",
        Second = "second",
    }
}

/// The wait that is missing, as data (`text.rs` puts it into words).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    pub action: FixAction,
    /// The label of the stream to record an event on (or to synchronize with).
    pub record_on: String,
    pub after: Operation,
    /// The label of the stream that must wait (`the host` for `host-waits`).
    pub wait_on: String,
    pub before: Operation,
}

/// A note: not a race.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteReport {
    pub kind: NoteKind,
    /// In words (`text.rs`, `note_message`): the note's facts are not all in the document.
    pub message: String,
    pub count: u64,
    pub api: String,
    pub site: Vec<Frame>,
}

impl Report {
    /// An empty report for this process.
    pub fn new(pid: u32, command: Vec<String>) -> Report {
        Report {
            tool: "streamsan".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            schema: SCHEMA,
            pid,
            command,
            ..Report::default()
        }
    }

    /// The races of one kind (by its name, `free-race`, as tests and people write it).
    pub fn races_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a RaceReport> + 'a {
        self.races.iter().filter(move |r| r.kind == kind)
    }

    /// Recomputes `summary` from `races` (keeping the count of suppressed ones).
    pub fn summarize(&mut self) {
        let mut summary =
            Summary { races: self.races.len() as u64, suppressed: self.summary.suppressed, ..Summary::default() };
        for race in &self.races {
            summary.occurrences += race.count;
            *summary.by_kind.entry(race.kind).or_insert(0) += 1;
        }
        self.summary = summary;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary counts entries, occurrences and kinds afresh, and keeps the count of races
    /// suppressions left out (which only the suppressing step knows).
    #[test]
    fn a_summary_counts_entries_occurrences_and_kinds_and_keeps_the_suppressed() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/cross-stream-raw.json");
        let mut report = Report::read_from(std::path::Path::new(path)).unwrap();
        let mut race = report.races[0].clone();
        (report.races[0].count, race.count) = (3, 2);
        report.races = vec![report.races[0].clone(), race];
        report.summary = Summary { suppressed: 4, ..Summary::default() };
        report.summarize();
        let by_kind = BTreeMap::from([(RaceKind::CrossStream, 2)]);
        assert_eq!(report.summary, Summary { races: 2, occurrences: 5, by_kind, suppressed: 4 });
        assert_eq!(report.races_of("cross-stream-race").count(), 2);
        assert_eq!(report.races_of("free-race").count(), 0);
    }
}
