//! The list a run keeps of its reports (`STREAMSAN_RUN`): every process of the run appends a
//! line when it creates its report file or fails to, and `streamsan run` reads the list at
//! the end, whatever the process tree looked like. The list also says which processes the
//! shim was loaded into, which called the driver, and which `exec`ed a program without it
//! ([`Processes`]), so that a run that checked nothing does not read as a clean one.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The variable that names the list for the processes of a run.
pub const ENV: &str = "STREAMSAN_RUN";

/// What a process did with its report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// It created its report file at this path.
    Written(PathBuf),
    /// Its report could not be written there (or no longer can): why, and how many races
    /// it held then. The report goes to the process's stderr.
    Unwritten { path: PathBuf, races: u64, why: String },
}

/// What a process of the run did, besides its report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The shim was loaded into process `pid`.
    Loaded(u32),
    /// Process `pid` made its first driver call.
    Called(u32),
    /// Process `pid` `exec`ed `program` with an environment that no longer preloads the shim.
    Dropped { pid: u32, program: String },
}

/// The processes of a run, as its list tells them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Processes {
    /// Those the shim was loaded into.
    pub loaded: Vec<u32>,
    /// Those that called the driver.
    pub called: Vec<u32>,
    /// Programs started by `exec` without the shim: the pid, the program.
    pub dropped: Vec<(u32, String)>,
}

/// A run's list of reports.
#[derive(Clone, Debug)]
pub struct RunLog {
    path: PathBuf,
}

impl RunLog {
    /// A new, empty list for a run, in the temporary directory (not beside the reports:
    /// their folder may vanish during the run).
    pub fn create() -> io::Result<RunLog> {
        Self::create_in(&std::env::temp_dir())
    }

    /// A new, empty list in `dir`.
    fn create_in(dir: &Path) -> io::Result<RunLog> {
        // A list left by a wrapper that was killed may hold the name: take the next.
        for attempt in 0..100u32 {
            let path = dir.join(format!("streamsan-run.{}.{attempt}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
                Ok(_) => return Ok(RunLog { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free name in the temporary directory"))
    }

    /// The list of the run this process belongs to, if it runs under `streamsan run`.
    pub fn from_env() -> Option<RunLog> {
        let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
        Some(RunLog { path: PathBuf::from(path) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds `entry`, its path as bytes; best effort (a list that cannot be written costs the
    /// summary, not the report).
    pub fn record(&self, entry: &Entry) {
        let one_line = |s: &str| s.replace(['\t', '\n'], " ");
        let fields = match entry {
            Entry::Written(_) => "written\t".to_string(),
            Entry::Unwritten { races, why, .. } => format!("unwritten\t{races}\t{}\t", one_line(why)),
        };
        let line = [fields.as_bytes(), entry.path().as_os_str().as_bytes(), b"\n"].concat();
        self.append(&line);
    }

    /// Appends `line` in one `write(2)`, so that lines of processes writing at once do not mix.
    fn append(&self, line: &[u8]) {
        let appended = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line));
        drop(appended);
    }

    /// The lines of the list, as bytes: a report's path need not be UTF-8.
    fn lines(&self) -> Vec<Vec<u8>> {
        let bytes = std::fs::read(&self.path).unwrap_or_default();
        bytes.split(|&b| b == b'\n').filter(|line| !line.is_empty()).map(<[u8]>::to_vec).collect()
    }

    /// Adds `event`; best effort, as [`RunLog::record`].
    pub fn note(&self, event: &Event) {
        let line = match event {
            Event::Loaded(pid) => format!("loaded\t{pid}\n"),
            Event::Called(pid) => format!("called\t{pid}\n"),
            Event::Dropped { pid, program } => format!("dropped\t{pid}\t{}\n", program.replace(['\t', '\n'], " ")),
        };
        self.append(line.as_bytes());
    }

    /// The processes the list tells of.
    pub fn processes(&self) -> Processes {
        let mut processes = Processes::default();
        for line in self.lines() {
            let line = String::from_utf8_lossy(&line);
            let mut fields = line.splitn(3, '\t');
            let (kind, pid) = (fields.next(), fields.next().and_then(|p| p.parse().ok()));
            match (kind, pid, fields.next()) {
                (Some("loaded"), Some(pid), None) => processes.loaded.push(pid),
                (Some("called"), Some(pid), None) => processes.called.push(pid),
                (Some("dropped"), Some(pid), Some(program)) => processes.dropped.push((pid, program.to_string())),
                _ => {}
            }
        }
        processes
    }

    /// What the processes did, one entry per report path (the latest said), in the order
    /// the paths first appeared.
    pub fn read(&self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = Vec::new();
        for line in self.lines() {
            let mut fields = line.splitn(4, |&b| b == b'\t');
            let path = |bytes: &[u8]| PathBuf::from(OsStr::from_bytes(bytes));
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            let entry = match (fields.next(), fields.next(), fields.next(), fields.next()) {
                (Some(b"written"), Some(written), None, None) => Entry::Written(path(written)),
                (Some(b"unwritten"), Some(races), Some(why), Some(unwritten)) => {
                    Entry::Unwritten { path: path(unwritten), races: text(races).parse().unwrap_or(0), why: text(why) }
                }
                _ => continue,
            };
            match entries.iter_mut().find(|e| e.path() == entry.path()) {
                Some(known) => *known = entry,
                None => entries.push(entry),
            }
        }
        entries
    }

    /// The directory where the run's processes that share memory and events through CUDA
    /// IPC tell each other what they did (the shim's `hooks/peers.rs`): made by the first of
    /// them, removed with the list.
    pub fn peers_dir(&self) -> PathBuf {
        let mut dir = self.path.clone().into_os_string();
        dir.push(".peers");
        dir.into()
    }

    /// Removes the list, once read, and the run's peers' directory.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(self.peers_dir());
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Entry {
    pub fn path(&self) -> &Path {
        match self {
            Entry::Written(path) | Entry::Unwritten { path, .. } => path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_entry_of_each_report_is_kept_in_order() {
        let log = RunLog::create().unwrap();
        log.record(&Entry::Written("/r/a.json".into()));
        log.record(&Entry::Written("/r/b.json".into()));
        log.record(&Entry::Unwritten { path: "/r/a.json".into(), races: 3, why: "No space\tleft\non device".into() });
        let entries = log.read();
        assert_eq!(
            entries,
            [
                Entry::Unwritten { path: "/r/a.json".into(), races: 3, why: "No space left on device".into() },
                Entry::Written("/r/b.json".into()),
            ]
        );
        log.remove();
    }

    /// A report's path that is not UTF-8 is read back as written, the other lines with it.
    #[test]
    fn processes_are_read_apart_from_reports() {
        let log = RunLog::create().unwrap();
        let path = PathBuf::from(OsStr::from_bytes(b"/r/caf\xe9.json"));
        log.note(&Event::Loaded(7));
        log.record(&Entry::Written(path.clone()));
        log.note(&Event::Called(7));
        log.note(&Event::Dropped { pid: 8, program: "/bin/x\ty".into() });
        assert_eq!(log.read(), [Entry::Written(path)]);
        let processes = log.processes();
        assert_eq!(processes, Processes { loaded: vec![7], called: vec![7], dropped: vec![(8, "/bin/x y".into())] });
        log.remove();
    }

    /// A list a killed wrapper left at the name is not this run's: the next name is taken,
    /// and a list once read is removed.
    #[test]
    fn a_list_left_behind_is_passed_over_and_a_list_read_is_removed() {
        // A folder of its own: the other tests' lists, in the temporary directory, take the
        // same names.
        let dir = std::env::temp_dir().join(format!("streamsan-run-left.{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let left = dir.join(format!("streamsan-run.{}.0", std::process::id()));
        std::fs::write(&left, "written\t/r/old.json\n").unwrap();
        let log = RunLog::create_in(&dir).unwrap();
        assert_ne!(log.path(), left);
        assert!(log.read().is_empty(), "a new list is empty");
        let path = log.path().to_path_buf();
        log.remove();
        assert!(!path.exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
