//! Report files: never written over a file that was there before, never through a
//! symbolic link, and always whole (a reader sees the previous report or the next).
//!
//! A process creates its report file once ([`ReportFile::create`], which fails if anything
//! is at the path already), then replaces its content as races are found: each version is
//! written to a fresh temporary file beside it and renamed over it.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Report;

/// A report file this process created.
#[derive(Debug)]
pub struct ReportFile {
    path: PathBuf,
}

/// A new file at `path`: refused if anything (a file, a link, a directory) is there.
fn create_new(path: &Path) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

impl ReportFile {
    /// Creates the report file at `path`, with `report` in it.
    pub fn create(path: &Path, report: &Report) -> io::Result<ReportFile> {
        let mut file = create_new(path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => io::Error::new(
                e.kind(),
                "a file is there already (streamsan does not overwrite it)",
            ),
            _ => e,
        })?;
        file.write_all(&render(report)?)?;
        Ok(ReportFile {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's content with `report`.
    pub fn write(&self, report: &Report) -> io::Result<()> {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self
            .path
            .with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let result = create_new(&tmp)
            .and_then(|mut f| f.write_all(&render(report)?))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
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
pub fn check_destination(pattern: &str) -> Result<(), String> {
    let path = Path::new(pattern);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let writable = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        // SAFETY: a NUL-terminated path.
        .map(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0)
        .unwrap_or(false);
    if !dir.is_dir() {
        return Err(format!(
            "cannot write reports to {pattern}: {} is not a directory",
            dir.display()
        ));
    }
    if !writable {
        return Err(format!(
            "cannot write reports to {pattern}: the directory {} is not writable",
            dir.display()
        ));
    }
    if !pattern.contains("%p") && std::fs::symlink_metadata(path).is_ok() {
        return Err(format!(
            "{pattern} exists already; streamsan does not overwrite it (remove it, or put %p, the process id, in the path)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("streamsan-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_report_file_is_created_once_and_replaced_whole() {
        let dir = scratch("create");
        let path = dir.join("r.json");
        let mut report = Report::new(1, vec![]);
        let file = ReportFile::create(&path, &report).unwrap();
        report.pid = 2;
        file.write(&report).unwrap();
        assert_eq!(Report::read_from(&path).unwrap().pid, 2);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        let again = ReportFile::create(&path, &report).unwrap_err();
        assert!(again.to_string().contains("does not overwrite"), "{again}");
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

    #[test]
    fn destinations_are_checked_before_a_run() {
        let dir = scratch("check");
        assert!(check_destination(&format!("{}/r.%p.json", dir.display())).is_ok());
        std::fs::write(dir.join("r.json"), "").unwrap();
        assert!(check_destination(&format!("{}/r.json", dir.display()))
            .unwrap_err()
            .contains("exists already"));
        assert!(
            check_destination(&format!("{}/nowhere/r.%p.json", dir.display()))
                .unwrap_err()
                .contains("not a directory")
        );
    }
}
