//! What the processes of a run that share memory and events through CUDA IPC tell each
//! other (`docs/semantics.md#ipc`): a directory only the user can enter, one append-only file
//! per process that exported or opened a handle, a JSON line per fact. The exporter writes
//! the handle's address, every access to the shared bytes and every record of an exported
//! event before the call returns to the program; the others read the files only when they
//! touch what they share, so a process that shares nothing never looks. A process that died
//! leaves its file, read as it was.

use std::collections::{HashMap, HashSet};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use streamsan::model::clock::Epoch;
use streamsan::model::op::{Mode, OpRecord, StackId, ThreadId};
use streamsan::model::peers::{Exchange, PeerEpoch, PeerStream, ShareKey, SharedAccess};
use streamsan::model::Model;
use streamsan::report::build::{self, Symbols};
use streamsan::report::run::RunLog;
use streamsan::report::Frame;

use crate::sites::stack;

/// Names the run's directory for the processes that share memory and events.
pub const ENV: &str = "STREAMSAN_PEERS";

/// Whether this process exported or opened an IPC handle: from then on its work is told to
/// the model as it is called ([`super::batch`]), so that what it publishes is on the disk
/// before the program can tell another process about it.
static SHARING: AtomicBool = AtomicBool::new(false);

pub fn sharing() -> bool {
    SHARING.load(Ordering::Relaxed)
}

/// At load: names the run's directory for this process and those it starts, unless a process
/// above it did. Under `streamsan run`, beside the run's list (removed with it); without it,
/// in the temporary directory, after this process.
pub fn name_directory() {
    if std::env::var_os(ENV).is_some() {
        return;
    }
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() };
    let dir = match RunLog::from_env() {
        Some(run) => run.peers_dir(),
        None => std::env::temp_dir().join(format!("streamsan-peers.{user}.{}", std::process::id())),
    };
    // At load, before the program's threads: nothing reads the environment at once.
    std::env::set_var(ENV, dir);
}

/// One line of a process's file.
#[derive(Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "kebab-case")]
enum Line {
    /// Memory exported: the handle's bytes, and the address and size it names in the writer.
    Memory { handle: String, addr: u64, size: u64 },
    /// The last record of an exported event: its clock, as epochs of the run's processes.
    Event { handle: String, clock: Vec<PeerEpoch> },
    /// What the writer's host had waited for of its own streams, at `at` (`peers::now`).
    Joined { clock: Vec<PeerEpoch>, at: u64 },
    /// A call site of the writer, by its number there, named once.
    Site { site: u32, frames: Vec<Frame> },
    /// An access to shared memory.
    Access(Published),
}

/// An access to shared memory, as its process publishes it: bytes from the start of what
/// is shared, and the operation's epoch, stream, entry point, kernel, thread and call site.
#[derive(Clone, Serialize, Deserialize)]
struct Published {
    exporter: u32,
    exported: u64,
    lo: u64,
    hi: u64,
    mode: Mode,
    slot: u32,
    time: u32,
    stream: Stream,
    api: String,
    kernel: Option<(String, String)>,
    thread: u32,
    site: u32,
    knew: Vec<PeerEpoch>,
    issued_at: u64,
}

/// The stream of a published access, as its process names it.
#[derive(Clone, Serialize, Deserialize)]
struct Stream {
    label: String,
    handle: u64,
    kind: String,
    ctx: u64,
}

/// Another process's file, read so far.
struct Reader {
    file: File,
    /// The end of a line not yet whole.
    partial: Vec<u8>,
}

/// What this process knows of the run's directory.
struct Directory {
    /// The process this is of: a forked child starts afresh, with files of its own.
    pid: u32,
    /// This process's own file.
    mine: Option<File>,
    published_sites: HashSet<u32>,
    others: HashMap<u32, Reader>,
    /// Memory the others exported, by handle: where it is shared, and its size.
    memory: HashMap<String, (ShareKey, u64)>,
    /// The last record of each event the others exported, by handle.
    events: HashMap<String, Vec<PeerEpoch>>,
    /// The others' call sites, as sites of this process.
    sites: HashMap<(u32, u32), StackId>,
    /// The others' accesses to shared memory, in the order read.
    accesses: HashMap<ShareKey, Vec<(u32, Published)>>,
    /// What the others' hosts waited for, read and not yet told to the model.
    joined: Vec<(Vec<PeerEpoch>, u64)>,
    /// What this process last published of its host's waits.
    published_joined: Vec<PeerEpoch>,
    /// Events this process exported, and those it opened: their handles.
    exported_events: HashMap<u64, String>,
    opened_events: HashMap<u64, String>,
}

static DIRECTORY: Mutex<Option<Directory>> = Mutex::new(None);

/// This process's directory state (a forked child's parent's is dropped: the child would
/// read through the parent's descriptors, moving their offsets under it).
fn directory() -> MutexGuard<'static, Option<Directory>> {
    let mut guard = DIRECTORY.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_some_and(|d| d.pid != std::process::id()) {
        *guard = None;
    }
    guard
}

/// The run's directory, made (0700) if it is not there; None when it cannot be made, or is
/// not a directory this user alone can enter (another user's files are never read).
fn path() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(ENV)?);
    let _ = DirBuilder::new().mode(0o700).create(&dir);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    // SAFETY: geteuid cannot fail.
    let private = meta.is_dir() && meta.uid() == unsafe { libc::geteuid() } && meta.mode() & 0o077 == 0;
    private.then_some(dir)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Directory {
    fn new() -> Directory {
        Directory {
            pid: std::process::id(),
            mine: None,
            published_sites: HashSet::new(),
            others: HashMap::new(),
            memory: HashMap::new(),
            events: HashMap::new(),
            sites: HashMap::new(),
            accesses: HashMap::new(),
            joined: Vec::new(),
            published_joined: Vec::new(),
            exported_events: HashMap::new(),
            opened_events: HashMap::new(),
        }
    }

    /// Appends `line` to this process's file, in one `write(2)`.
    fn write(&mut self, line: &Line) {
        if self.mine.is_none() {
            let Some(dir) = path() else { return };
            let file = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(dir.join(self.pid.to_string()));
            self.mine = file.ok();
        }
        let Some(file) = &mut self.mine else { return };
        let Ok(mut bytes) = serde_json::to_vec(line) else { return };
        bytes.push(b'\n');
        let _ = file.write_all(&bytes);
    }

    /// Reads what the other processes wrote since the last look.
    fn read_others(&mut self) {
        let Some(dir) = path() else { return };
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if pid == self.pid || self.others.contains_key(&pid) {
                continue;
            }
            let file =
                OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW).open(entry.path());
            if let Ok(file) = file {
                self.others.insert(pid, Reader { file, partial: Vec::new() });
            }
        }
        let mut lines = Vec::new();
        for (&pid, reader) in &mut self.others {
            let _ = reader.file.read_to_end(&mut reader.partial);
            let Some(end) = reader.partial.iter().rposition(|&b| b == b'\n') else { continue };
            let whole: Vec<u8> = reader.partial.drain(..=end).collect();
            for line in whole.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                if let Ok(line) = serde_json::from_slice::<Line>(line) {
                    lines.push((pid, line));
                }
            }
        }
        for (pid, line) in lines {
            self.learn(pid, line);
        }
    }

    fn learn(&mut self, pid: u32, line: Line) {
        match line {
            Line::Memory { handle, addr, size } => {
                self.memory.insert(handle, (ShareKey { pid, addr }, size));
            }
            Line::Event { handle, clock } => {
                self.events.insert(handle, clock);
            }
            Line::Joined { clock, at } => self.joined.push((clock, at)),
            Line::Site { site, frames } => {
                self.sites.insert((pid, site), stack::peer_site(frames));
            }
            Line::Access(access) => {
                let key = ShareKey { pid: access.exporter, addr: access.exported };
                self.accesses.entry(key).or_default().push((pid, access));
            }
        }
    }

    /// Publishes this process's `access` to the memory `key`.
    fn publish(&mut self, model: &Model, key: ShareKey, access: &SharedAccess) {
        let op = access.op;
        if self.published_sites.insert(op.site.0) {
            self.write(&Line::Site { site: op.site.0, frames: stack::portable(op.site) });
        }
        let stream = build::stream(model, op.epoch, &Unresolved);
        let published = Published {
            exporter: key.pid,
            exported: key.addr,
            lo: access.lo,
            hi: access.hi,
            mode: access.mode,
            slot: op.epoch.slot,
            time: op.epoch.time,
            stream: Stream {
                label: stream.label,
                handle: unhex(&stream.handle),
                kind: stream.kind,
                ctx: unhex(&stream.context),
            },
            api: op.api.into(),
            kernel: op.kernel.map(|k| (model.kernel_name(k), model.kernel_symbol(k))),
            thread: op.thread.0,
            site: op.site.0,
            knew: access.knew.clone(),
            issued_at: access.issued_at,
        };
        self.write(&Line::Access(published));
    }

    /// Another process's access, in this process's terms.
    fn local(&self, model: &Model, pid: u32, theirs: &Published) -> SharedAccess {
        let Stream { label, handle, kind, ctx } = theirs.stream.clone();
        let stream = PeerStream { pid, slot: theirs.slot, label, handle, kind, ctx };
        let slot = model.peer_slot(pid, theirs.slot, Some((&stream, theirs.time)));
        let op = OpRecord {
            epoch: Epoch::new(slot, theirs.time),
            api: interned(&theirs.api),
            kernel: theirs.kernel.as_ref().map(|(name, symbol)| model.kernel_id(name, symbol)),
            thread: ThreadId(theirs.thread),
            site: self.sites.get(&(pid, theirs.site)).copied().unwrap_or_default(),
        };
        SharedAccess {
            lo: theirs.lo,
            hi: theirs.hi,
            mode: theirs.mode,
            op,
            knew: theirs.knew.clone(),
            issued_at: theirs.issued_at,
        }
    }
}

fn unhex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or(0)
}

/// Another process's entry point name, kept for the process's life (a few dozen names).
fn interned(api: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(name) = names.iter().find(|n| **n == api) {
        return name;
    }
    let name: &'static str = Box::leak(api.to_owned().into_boxed_str());
    names.push(name);
    name
}

/// Streams described without the frames of where they were made: a published access names
/// its stream, not its creation.
struct Unresolved;

impl Symbols for Unresolved {
    fn frames(&self, _: StackId) -> Vec<Frame> {
        Vec::new()
    }
    fn tid(&self, _: ThreadId) -> Option<u32> {
        None
    }
    fn test(&self, _: StackId) -> Option<String> {
        None
    }
}

/// The model's way to the other processes: this directory.
struct Files;

impl Exchange for Files {
    fn access(&self, model: &Model, key: ShareKey, seen: &mut usize, access: &SharedAccess) -> Vec<SharedAccess> {
        let mut guard = directory();
        let directory = guard.get_or_insert_with(Directory::new);
        if access.lo < access.hi {
            directory.publish(model, key, access);
        }
        directory.read_others();
        for (joined, at) in directory.joined.drain(..) {
            model.completed_by_peer(&joined, at);
        }
        let Some(theirs) = directory.accesses.get(&key) else { return Vec::new() };
        let new = theirs.get(*seen..).unwrap_or_default();
        *seen = theirs.len();
        new.iter().map(|(pid, published)| directory.local(model, *pid, published)).collect()
    }
}

/// From the first handle exported or opened on: the model exchanges shared memory through
/// the directory, work is told as it is called, and the host's waits are published.
fn start_sharing(model: &Model) {
    if !SHARING.swap(true, Ordering::AcqRel) {
        model.exchange_through(Box::new(Files));
        // What the host waited for before: work the others need not wait for.
        host_joined(model);
    }
}

/// `cuIpcGetMemHandle`, `cuMemPoolExportPointer`: `handle` names `size` bytes at `addr`,
/// which become shared memory, this process's work on them so far published.
pub fn exported_memory(model: &Model, handle: &[u8], addr: u64, size: u64) {
    start_sharing(model);
    directory().get_or_insert_with(Directory::new).write(&Line::Memory { handle: hex(handle), addr, size });
    model.share(addr, size, ShareKey { pid: std::process::id(), addr });
}

/// `cuIpcOpenMemHandle`, `cuMemPoolImportPointer`: the memory at `base` is what another
/// process of the run exported as `handle`; false when none did.
pub fn opened_memory(model: &Model, handle: &[u8], base: u64) -> bool {
    let found = {
        let mut guard = directory();
        let directory = guard.get_or_insert_with(Directory::new);
        directory.read_others();
        directory.memory.get(&hex(handle)).copied()
    };
    let Some((key, size)) = found else { return false };
    start_sharing(model);
    model.share(base, size, key);
    true
}

/// `cuIpcGetEventHandle`: `event`'s records are published from now on, and its last one
/// now (none yet: an empty clock, so that the handle is known as the run's).
pub fn exported_event(model: &Model, handle: &[u8], event: u64) {
    start_sharing(model);
    directory().get_or_insert_with(Directory::new).exported_events.insert(event, hex(handle));
    recorded(model, event);
}

/// After a record of `event`, told to the model: published, if the event was exported.
pub fn recorded(model: &Model, event: u64) {
    if !sharing() {
        return;
    }
    let mut guard = directory();
    let Some(directory) = guard.as_mut() else { return };
    let Some(handle) = directory.exported_events.get(&event).cloned() else { return };
    let clock = model.event_shared_clock(event).unwrap_or_default();
    directory.write(&Line::Event { handle, clock });
}

/// After the host waited for work, told to the model: in a process that shares, what the
/// host has waited for is published when it grew.
pub fn host_joined(model: &Model) {
    if !sharing() {
        return;
    }
    let clock = model.host_shared_clock();
    let mut guard = directory();
    let directory = guard.get_or_insert_with(Directory::new);
    if clock != directory.published_joined {
        directory.write(&Line::Joined { clock: clock.clone(), at: streamsan::model::peers::now() });
        directory.published_joined = clock;
    }
}

/// `cuIpcOpenEventHandle`: `event` stands here for the event another process of the run
/// exported as `handle`; false when none did.
pub fn opened_event(model: &Model, handle: &[u8], event: u64) -> bool {
    let handle = hex(handle);
    let known = {
        let mut guard = directory();
        let directory = guard.get_or_insert_with(Directory::new);
        directory.read_others();
        let known = directory.events.contains_key(&handle);
        if known {
            directory.opened_events.insert(event, handle);
        }
        known
    };
    if known {
        start_sharing(model);
    }
    known
}

/// Before a wait on or a synchronize with `event`: if it was opened from another process's
/// handle, its last record there becomes its record here.
pub fn refresh(model: &Model, event: u64) {
    if !sharing() {
        return;
    }
    let clock = {
        let mut guard = directory();
        let Some(directory) = guard.as_mut() else { return };
        let Some(handle) = directory.opened_events.get(&event).cloned() else { return };
        directory.read_others();
        directory.events.get(&handle).cloned()
    };
    // An empty clock: not recorded yet there, and a wait on it orders nothing.
    if let Some(clock) = clock.filter(|c| !c.is_empty()) {
        model.event_recorded_by_peer(event, &clock);
    }
}
