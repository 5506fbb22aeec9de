//! Report files: never written over a file that was there before nor through a symbolic link,
//! always whole (written beside, flushed, renamed over), and each race found between two
//! rewrites appended at once to a race log, so that a killed process loses no race.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::{RaceReport, Report};
use crate::options::{has_pid, shown_path};

/// A report file this process created.
#[derive(Debug)]
pub struct ReportFile {
    path: PathBuf,
    /// The race log, open while it holds races the file does not.
    log: Option<File>,
}

/// A new file at `path`: refused if anything (a file, a link, a directory) is there.
fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The race log of the report at `path`: `.NAME.races` beside it.
pub fn race_log(path: &Path) -> PathBuf {
    beside(path, ".races")
}

/// The longest name of a file (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// A hidden file beside `path`: `.NAME` then `suffix`. Where that name would be too long,
/// NAME's first bytes and a hash of all of it, so that a report named near the limit still
/// has its temporary file and its race log.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    let mut hidden = b".".to_vec();
    if 1 + name.len() + suffix.len() <= NAME_MAX {
        hidden.extend_from_slice(name);
    } else {
        // FNV-1a: the same in every build, for the reader finds the log by this name.
        let hash = name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
        let hash = format!("~{hash:016x}");
        hidden.extend_from_slice(&name[..NAME_MAX - 1 - hash.len() - suffix.len()]);
        hidden.extend_from_slice(hash.as_bytes());
    }
    hidden.extend_from_slice(suffix.as_bytes());
    path.with_file_name(std::ffi::OsString::from_vec(hidden))
}

/// Writes `report` to a fresh temporary file beside `path`, on the disk when this returns;
/// returns its path. Nothing is left behind on failure.
fn write_aside(path: &Path, report: &Report) -> io::Result<PathBuf> {
    let tmp = beside(path, &format!(".{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = create_new(&tmp).and_then(|mut f| {
        f.write_all(&render(report)?)?;
        f.sync_all()
    });
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

impl ReportFile {
    /// Creates the report file at `path`, with `report` in it; refused if anything is there.
    pub fn create(path: &Path, report: &Report) -> io::Result<ReportFile> {
        let tmp = write_aside(path, report)?;
        // link(2), unlike rename(2), fails when the name is taken.
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        linked.map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => {
                io::Error::new(e.kind(), "a file is there already (streamsan does not overwrite it)")
            }
            _ => e,
        })?;
        let file = ReportFile { path: path.to_path_buf(), log: None };
        file.forget_log();
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with `report` (which holds every race found), and removes the race
    /// log. On failure the previous version stays, whole, and so does the log.
    pub fn write(&mut self, report: &Report) -> io::Result<()> {
        let tmp = write_aside(&self.path, report)?;
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        self.log = None;
        self.forget_log();
        Ok(())
    }

    /// Appends `race`, found since the last [`write`](ReportFile::write), to the race log.
    pub fn append(&mut self, race: &RaceReport) -> io::Result<()> {
        if self.log.is_none() {
            self.log = Some(
                OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o644)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(race_log(&self.path))?,
            );
        }
        let mut line = serde_json::to_vec(race).map_err(io::Error::other)?;
        line.push(b'\n');
        // One write(2): appended whole, or (a full disk) a torn last line, which readers
        // skip and the caller reports.
        self.log.as_mut().expect("opened above").write_all(&line)
    }

    fn forget_log(&self) {
        let _ = std::fs::remove_file(race_log(&self.path));
    }
}

/// The races of a race log; a torn last line (the disk filled up) is left out.
pub fn read_race_log(path: &Path) -> io::Result<Vec<RaceReport>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
}

/// The report as the file holds it.
pub fn render(report: &Report) -> io::Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    text.push(b'\n');
    Ok(text)
}

/// Whether reports can be written to `pattern` (a report path, `%p` standing for process
/// ids): its directory exists and is writable, and, without `%p`, nothing is at the path.
/// Checked before a program starts, so that a mistake stops it rather than its report.
pub fn check_destination(path: &Path) -> Result<(), String> {
    let pattern = shown_path(path);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let writable = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        // SAFETY: a NUL-terminated path.
        .map(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0)
        .unwrap_or(false);
    if !dir.is_dir() {
        return Err(format!("cannot write reports to {pattern}: {} is not a directory", shown_path(&dir)));
    }
    if !writable {
        return Err(format!("cannot write reports to {pattern}: the directory {} is not writable", shown_path(&dir)));
    }
    if !has_pid(path) && std::fs::symlink_metadata(path).is_ok() {
        return Err(format!(
            "{pattern} exists already; streamsan does not overwrite it (remove it, or put %p, the process id, in the path)"
        ));
    }
    Ok(())
}

impl Report {
    /// Reads a report, with the races of its race log ([`race_log`]: those found
    /// since the file was last rewritten, when the process could not rewrite it again); a
    /// file that is not a report (truncated, corrupt, another tool's) is an `InvalidData`
    /// error that says where it went wrong.
    pub fn read_from(path: &Path) -> io::Result<Report> {
        let mut report = Report::read_file(path)?;
        let logged = read_race_log(&race_log(path))?;
        if !logged.is_empty() {
            // A process killed between a rewrite and the log's removal leaves races in both.
            let identity = |r: &RaceReport| {
                serde_json::to_string(&(&r.kind, &r.hazard, &r.buffer, &r.first, &r.second)).unwrap_or_default()
            };
            let known: std::collections::HashSet<String> = report.races.iter().map(identity).collect();
            report.races.extend(logged.into_iter().filter(|r| !known.contains(&identity(r))));
            report.summarize();
        }
        Ok(report)
    }

    /// Reads a report as [`Report::read_from`] does, handing each race to `on_race` as it is
    /// read (those of the race log last); returns the rest, its `races` empty.
    pub fn each_race_from(path: &Path, on_race: &mut dyn FnMut(RaceReport) -> io::Result<()>) -> io::Result<Report> {
        let mut logged = read_race_log(&race_log(path))?;
        let identity = |r: &RaceReport| {
            serde_json::to_string(&(&r.kind, &r.hazard, &r.buffer, &r.first, &r.second)).unwrap_or_default()
        };
        let mut logged_ids: Vec<String> = logged.iter().map(identity).collect();
        let report = super::read::each_race(path, super::read::MAX_REPORT_BYTES, &mut |race| {
            // A process killed between a rewrite and the log's removal leaves races in both.
            if !logged.is_empty() {
                if let Some(i) = logged_ids.iter().position(|id| *id == identity(&race)) {
                    logged.remove(i);
                    logged_ids.remove(i);
                }
            }
            on_race(race)
        })?;
        for race in logged {
            on_race(race)?;
        }
        Ok(report)
    }

    fn read_file(path: &Path) -> io::Result<Report> {
        let mut races = Vec::new();
        let mut report = super::read::each_race(path, super::read::MAX_REPORT_BYTES, &mut |race| {
            races.push(race);
            Ok(())
        })?;
        report.races = races;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory, removed when the test ends.
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("streamsan-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The first race of a report of the examples.
    fn example_race() -> RaceReport {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/cross-stream-raw.json");
        Report::read_from(Path::new(path)).unwrap().races.swap_remove(0)
    }

    #[test]
    fn a_report_file_is_created_once_and_replaced_whole() {
        let dir = scratch("create");
        let path = dir.join("r.json");
        let mut report = Report::new(1, vec![]);
        let mut file = ReportFile::create(&path, &report).unwrap();
        report.pid = 2;
        file.write(&report).unwrap();
        assert_eq!(Report::read_from(&path).unwrap().pid, 2);
        assert_eq!(std::fs::read_dir(&*dir).unwrap().count(), 1, "no temporary file left");
        let again = ReportFile::create(&path, &report).unwrap_err();
        assert!(again.to_string().contains("does not overwrite"), "{again}");
    }

    #[test]
    fn races_appended_between_rewrites_are_read_with_the_report_once() {
        let dir = scratch("log");
        let path = dir.join("r.json");
        let race = example_race();
        let mut report = Report::new(1, vec![]);
        let mut file = ReportFile::create(&path, &report).unwrap();
        file.append(&race).unwrap();
        assert!(race_log(&path).is_file());
        assert_eq!(Report::read_from(&path).unwrap().races, std::slice::from_ref(&race));
        // Killed between a rewrite and the log's removal: the race is counted once.
        report.races.push(race.clone());
        std::fs::write(&path, render(&report).unwrap()).unwrap();
        assert_eq!(Report::read_from(&path).unwrap().races.len(), 1);
        // A rewrite holds every race: the log goes.
        file.write(&report).unwrap();
        assert!(!race_log(&path).exists());
        // A torn last line (a full disk) is left out.
        std::fs::write(race_log(&path), "{\"kind\":").unwrap();
        assert_eq!(Report::read_from(&path).unwrap().races.len(), 1);
    }

    /// A report named near the longest name a file may have still has its temporary file
    /// and its race log, and leaves nothing else behind.
    #[test]
    fn a_report_named_near_the_longest_name_is_written_and_logged() {
        let dir = scratch("long-name");
        let path = dir.join(format!("{}.json", "r".repeat(NAME_MAX - 5)));
        let race = example_race();
        let mut report = Report::new(1, vec![]);
        let mut file = ReportFile::create(&path, &report).unwrap();
        file.append(&race).unwrap();
        assert_eq!(Report::read_from(&path).unwrap().races.len(), 1, "the race log is found");
        report.races.push(race);
        file.write(&report).unwrap();
        assert_eq!(Report::read_from(&path).unwrap().races.len(), 1);
        assert_eq!(std::fs::read_dir(&*dir).unwrap().count(), 1, "nothing left beside it");
    }

    #[test]
    fn a_symbolic_link_is_not_followed() {
        let dir = scratch("link");
        let target = dir.join("target");
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("r.json")).unwrap();
        assert!(ReportFile::create(&dir.join("r.json"), &Report::default()).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    /// The race log stays open for the rest of the process: it is never opened through a
    /// link planted at its name, and a program that starts another does not hand it on.
    #[test]
    fn the_race_log_is_not_followed_through_a_link_nor_inherited() {
        use std::os::fd::AsRawFd;
        let dir = scratch("log-link");
        let path = dir.join("r.json");
        let race = example_race();
        let target = dir.join("target");
        std::fs::write(&target, "precious").unwrap();
        let mut file = ReportFile::create(&path, &Report::default()).unwrap();
        std::os::unix::fs::symlink(&target, race_log(&path)).unwrap();
        assert!(file.append(&race).is_err(), "a link at the log's name is refused");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        std::fs::remove_file(race_log(&path)).unwrap();
        file.append(&race).unwrap();
        let fd = file.log.as_ref().expect("the log, open").as_raw_fd();
        // SAFETY: reading the flags of a descriptor this process holds.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0, "flags {flags}");
    }

    /// A race log that exists and cannot be read is an error, not a log without races.
    #[test]
    fn an_unreadable_race_log_is_an_error() {
        let dir = scratch("log-dir");
        assert!(read_race_log(&dir.join("absent")).unwrap().is_empty());
        assert!(read_race_log(&dir).is_err(), "a directory where the log should be");
    }

    #[test]
    fn destinations_are_checked_before_a_run() {
        let dir = scratch("check");
        assert!(check_destination(&dir.join("r.json")).is_ok(), "nothing there yet");
        assert!(check_destination(&dir.join("r.%p.json")).is_ok());
        std::fs::write(dir.join("r.json"), "").unwrap();
        assert!(check_destination(&dir.join("r.json")).unwrap_err().contains("exists already"));
        assert!(check_destination(&dir.join("nowhere/r.%p.json")).unwrap_err().contains("not a directory"));
    }
}
