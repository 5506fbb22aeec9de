//! The list a run keeps of its reports (`STREAMSAN_RUN`): every process of the run appends a
//! line when it creates its report file or fails to, and `streamsan run` reads the list at
//! the end, whatever the process tree looked like.

use std::fs::OpenOptions;
use std::io::{self, Write};
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

/// A run's list of reports.
#[derive(Clone, Debug)]
pub struct RunLog {
    path: PathBuf,
}

impl RunLog {
    /// A new, empty list for a run, in the temporary directory (not beside the reports:
    /// their folder may vanish during the run).
    pub fn create() -> io::Result<RunLog> {
        let dir = std::env::temp_dir();
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

    /// Adds `entry`; best effort (a list that cannot be written costs the summary, not
    /// the report).
    pub fn record(&self, entry: &Entry) {
        let one_line = |s: &str| s.replace(['\t', '\n'], " ");
        let line = match entry {
            Entry::Written(path) => format!("written\t{}\n", path.display()),
            Entry::Unwritten { path, races, why } => {
                format!("unwritten\t{races}\t{}\t{}\n", one_line(why), path.display())
            }
        };
        let appended = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        drop(appended);
    }

    /// What the processes did, one entry per report path (the latest said), in the order
    /// the paths first appeared.
    pub fn read(&self) -> Vec<Entry> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let mut entries: Vec<Entry> = Vec::new();
        for line in text.lines() {
            let mut fields = line.splitn(4, '\t');
            let entry = match (fields.next(), fields.next(), fields.next(), fields.next()) {
                (Some("written"), Some(path), None, None) => Entry::Written(path.into()),
                (Some("unwritten"), Some(races), Some(why), Some(path)) => {
                    Entry::Unwritten { path: path.into(), races: races.parse().unwrap_or(0), why: why.to_string() }
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

    /// Removes the list, once read.
    pub fn remove(self) {
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

    /// A list a killed wrapper left at the name is not this run's: the next name is taken,
    /// and a list once read is removed.
    #[test]
    fn a_list_left_behind_is_passed_over_and_a_list_read_is_removed() {
        let left = std::env::temp_dir().join(format!("streamsan-run.{}.0", std::process::id()));
        std::fs::write(&left, "written\t/r/old.json\n").unwrap();
        let log = RunLog::create().unwrap();
        assert_ne!(log.path(), left);
        assert!(log.read().is_empty(), "a new list is empty");
        let path = log.path().to_path_buf();
        log.remove();
        assert!(!path.exists());
        std::fs::remove_file(left).unwrap();
    }
}
