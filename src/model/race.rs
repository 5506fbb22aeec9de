//! What the model finds: races, counted once per pair of call sites, and notes.

use std::collections::HashMap;
use std::sync::Mutex;

use super::buffers::{Buffer, MemoryKind};
use super::op::{Mode, OpRecord, StackId};

named_enum! {
    /// The kinds of race (`docs/semantics.md#accesses-and-races`).
    pub enum RaceKind("race kind") {
        /// An access not ordered after the stream-ordered allocation of its buffer.
        UseBeforeAlloc = "use-before-alloc",
        /// A free not ordered after an access to the buffer.
        FreeRace = "free-race",
        /// An access to the bytes of a freed buffer.
        UseAfterFree = "use-after-free",
        /// Two accesses to the same bytes, at least one a write, neither ordered first.
        CrossStream = "cross-stream-race",
        /// The host touched bytes an asynchronous copy, memset or kernel it had not synchronized
        /// with uses: a store into what the operation reads (a host-to-device copy's source),
        /// any access to what it writes (a device-to-host copy's destination, a kernel's output).
        HostRace = "host-race",
    }
}

named_enum! {
    /// Which accesses a cross-stream race is between.
    pub enum Hazard("hazard") {
        ReadAfterWrite = "RAW",
        WriteAfterRead = "WAR",
        WriteAfterWrite = "WAW",
    }
}

impl Hazard {
    /// The hazard between two conflicting accesses. An access of unknown direction counts as
    /// the read it most often is (a consumer's input) against a write; against a read, it
    /// is the write (two reads do not conflict, nor do two unknown accesses).
    pub fn between(first: Mode, second: Mode) -> Hazard {
        let declared_writable = |mode| matches!(mode, Mode::Write | Mode::ReadWrite | Mode::Atomic);
        match (declared_writable(first), declared_writable(second)) {
            (true, false) => Hazard::ReadAfterWrite,
            (false, true) => Hazard::WriteAfterRead,
            (true, true) => Hazard::WriteAfterWrite,
            (false, false) if first == Mode::Unknown => Hazard::ReadAfterWrite,
            (false, false) => Hazard::WriteAfterRead,
        }
    }
}

/// What an operation did to the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Alloc,
    Free,
    Access { mode: Mode, lo: u64, hi: u64 },
}

/// One of the two operations of a race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    pub op: OpRecord,
    pub action: Action,
}

/// The buffer a race is on, as it was when the race was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferFacts {
    pub id: u64,
    pub base: u64,
    pub size: u64,
    pub kind: MemoryKind,
    /// The driver's handle of memory without an address (an array), else 0.
    pub handle: u64,
    pub alloc: OpRecord,
}

impl BufferFacts {
    pub fn of(buffer: &Buffer) -> BufferFacts {
        BufferFacts {
            id: buffer.id,
            base: buffer.base,
            size: buffer.size,
            kind: buffer.kind,
            handle: buffer.handle,
            alloc: buffer.alloc,
        }
    }
}

/// A race: `first` came earlier in issue order; `second` is the operation that exposed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Race {
    pub kind: RaceKind,
    pub hazard: Option<Hazard>,
    pub buffer: BufferFacts,
    pub first: Side,
    pub second: Side,
}

impl Race {
    /// Races with the same key are one entry of the report.
    fn key(&self) -> RaceKey {
        RaceKey {
            kind: self.kind,
            hazard: self.hazard,
            first: (self.first.op.site, self.first.op.api, self.first.op.kernel.map(|k| k.0)),
            second: (self.second.op.site, self.second.op.api, self.second.op.kernel.map(|k| k.0)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct RaceKey {
    kind: RaceKind,
    hazard: Option<Hazard>,
    first: (StackId, &'static str, Option<u32>),
    second: (StackId, &'static str, Option<u32>),
}

/// A race of the report: its first occurrence and how many times it occurred.
#[derive(Clone, Copy, Debug)]
pub struct RaceEntry {
    pub race: Race,
    pub count: u64,
}

/// Every race found, deduplicated.
#[derive(Default)]
pub struct Races {
    inner: Mutex<(HashMap<RaceKey, usize>, Vec<RaceEntry>)>,
}

impl Races {
    /// Counts `race`; returns whether it is new.
    pub fn add(&self, race: Race) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (index, list) = &mut *inner;
        match index.get(&race.key()) {
            Some(&i) => {
                list[i].count += 1;
                false
            }
            None => {
                index.insert(race.key(), list.len());
                list.push(RaceEntry { race, count: 1 });
                true
            }
        }
    }

    pub fn entries(&self) -> Vec<RaceEntry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).1.clone()
    }

    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0.clear();
        inner.1.clear();
    }
}

named_enum! {
    /// Things worth telling that are not races.
    pub enum NoteKind("note kind") {
        /// `cuStreamWaitEvent` on an event never recorded: a no-op (legal, common in a
        /// pipeline's first round).
        WaitOnUnrecordedEvent = "wait-on-unrecorded-event",
        /// A graph launch streamsan could not follow (not captured through the hooks): its work
        /// is not checked, and no race is reported for it.
        GraphNotFollowed = "graph-not-followed",
        /// A stream or event destroyed while work on it had not completed as far as the host
        /// knew (legal: CUDA releases it when the work is done).
        DestroyedWhilePending = "destroyed-while-pending",
        /// The footprint engine could not run (subject: a [`FootprintUnavailable`] as a
        /// number): kernels' footprints are their parameters' pointers.
        FootprintUnavailable = "footprint-unavailable",
        /// A measured launch touched more granules than its table holds: the rest of its bytes
        /// were taken as one cover.
        FootprintOverflow = "footprint-overflow",
        /// A launch to be measured was not (subject: a [`FootprintUnmeasured`] as a number):
        /// its parameters stood in for its footprint.
        FootprintUnmeasured = "footprint-unmeasured",
        /// What was learnt of a kernel (subject: the kernel's key) holds the cover of a table
        /// that overflowed: later launches take the cover's part in each buffer a pointer
        /// parameter points into.
        FootprintLearntCover = "footprint-learnt-cover",
        /// The host touched other data on a page guarded for an operation in flight, through a
        /// system call or more often than the page is guarded again after such an access: the
        /// page was unprotected, and host races on it go unseen until that operation is done.
        HostGuardGaveUp = "host-guard-gave-up",
        /// A kernel launched with programmatic stream serialization, or a kernel node reached
        /// through a programmatic edge: it may start before the kernel ahead of it completes,
        /// ordered after it only from its grid-dependency wait, and which of its accesses
        /// come before that wait is not known: they are taken as ordered from its start.
        ProgrammaticLaunch = "programmatic-launch",
        /// Memory or an event was opened from an IPC handle no process of the run exported
        /// (subject: the memory's base, or the event): the exporter's work is not seen.
        IpcImport = "ipc-import",
    }
}

/// Why the footprint engine is off (a [`NoteKind::FootprintUnavailable`] note's subject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum FootprintUnavailable {
    NoLibrary = 0,
    OtherSubscriber = 1,
    Refused = 2,
}

/// Why a launch to be measured was not (a [`NoteKind::FootprintUnmeasured`] note's subject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum FootprintUnmeasured {
    /// Every table was waiting to be read (the program did not synchronize for long).
    NoTable = 0,
    /// Its module has variables of its own (`__device__`, `__constant__`), which a twin of
    /// the module would not share.
    ModuleState = 1,
    /// Its module's code could not be loaded a second time as a twin.
    NoTwin = 2,
    /// The driver refused the launch on the twin (the program's own launch was made).
    Refused = 3,
}

/// A note: counted once per (kind, call site).
#[derive(Clone, Debug)]
pub struct Note {
    pub kind: NoteKind,
    pub op: OpRecord,
    /// What the note is about, e.g. the event handle.
    pub subject: u64,
    pub count: u64,
}

/// What makes two notes one: their kind, call site and entry point.
type NoteKey = (NoteKind, StackId, &'static str);

#[derive(Default)]
pub struct Notes {
    inner: Mutex<(HashMap<NoteKey, usize>, Vec<Note>)>,
}

impl Notes {
    pub fn add(&self, kind: NoteKind, op: OpRecord, subject: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (index, list) = &mut *inner;
        match index.get(&(kind, op.site, op.api)) {
            Some(&i) => list[i].count += 1,
            None => {
                index.insert((kind, op.site, op.api), list.len());
                list.push(Note { kind, op, subject, count: 1 });
            }
        }
    }

    pub fn entries(&self) -> Vec<Note> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).1.clone()
    }

    pub fn clear(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.0.clear();
        inner.1.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_of_unknown_direction_is_the_write_against_a_read_and_the_read_against_a_write() {
        use Hazard::*;
        use Mode::*;
        assert_eq!(Hazard::between(Write, Read), ReadAfterWrite);
        assert_eq!(Hazard::between(Read, ReadWrite), WriteAfterRead);
        assert_eq!(Hazard::between(Atomic, Write), WriteAfterWrite);
        // A read, then a kernel that may write what it read: the kernel is the write.
        assert_eq!(Hazard::between(Read, Unknown), WriteAfterRead);
        assert_eq!(Hazard::between(Unknown, Read), ReadAfterWrite);
        // Against a write, it is the read it most often is.
        assert_eq!(Hazard::between(Unknown, Write), WriteAfterRead);
        assert_eq!(Hazard::between(ReadWrite, Unknown), ReadAfterWrite);
    }
}
