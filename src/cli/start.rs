//! Starting a program under the shim: find `libstreamsan_shim.so`, put it first in
//! `LD_PRELOAD` (keeping what is there), pass the options in `STREAMSAN_OPTIONS`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::options::{split_at_pid, Options};

/// The shim's file name, as cargo builds it.
pub const SHIM_FILE: &str = "libstreamsan_shim.so";

/// The shim to preload: `STREAMSAN_SHIM` if set, else the one beside `exe`.
pub fn find_shim(exe: &Path) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("STREAMSAN_SHIM") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("STREAMSAN_SHIM names {}, which is not a file", path.display()))
        };
    }
    let dir = exe.parent().ok_or_else(|| format!("{} has no directory", exe.display()))?;
    let path = dir.join(SHIM_FILE);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "cannot find the shim {SHIM_FILE} beside {} (build it with `cargo build`, or set STREAMSAN_SHIM)",
            exe.display()
        ))
    }
}

/// `shim` first, then whatever `LD_PRELOAD` already held.
pub fn preload_value(shim: &Path, existing: Option<OsString>) -> OsString {
    let mut value = OsString::from(shim);
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// A command that runs `program` with `args` under the shim with `options`.
pub fn command(shim: &Path, options: &Options, program: &OsString, args: &[OsString]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env("LD_PRELOAD", preload_value(shim, std::env::var_os("LD_PRELOAD")));
    cmd.env("STREAMSAN_OPTIONS", options.to_env());
    cmd
}

/// The files matching `pattern` (a report path, `%p` standing for any process id, and a
/// forked child's `.PID` after a path without one), names compared as bytes. Listed before
/// and after a run, the new ones are the run's reports: the shim never writes over a file
/// already there.
pub fn reports_matching(pattern: &Path) -> Vec<PathBuf> {
    // A bare name lists bare names, as the processes of the run name their reports.
    let (dir, bare) = match pattern.parent() {
        Some(d) if !d.as_os_str().is_empty() => (d.to_path_buf(), false),
        _ => (PathBuf::from("."), true),
    };
    let name = pattern.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let file = e.file_name();
            let file = file.as_bytes();
            match split_at_pid(name) {
                Some((prefix, suffix)) => {
                    file.len() > prefix.len() + suffix.len()
                        && file.starts_with(prefix)
                        && file.ends_with(suffix)
                        && digits(&file[prefix.len()..file.len() - suffix.len()])
                }
                None => {
                    file == name || file.strip_prefix(name).and_then(|rest| rest.strip_prefix(b".")).is_some_and(digits)
                }
            }
        })
        .map(|e| if bare { PathBuf::from(e.file_name()) } else { e.path() })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_reports_of_a_run_by_pattern() {
        let dir = std::env::temp_dir().join(format!("streamsan-launch-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["r.12.json", "r.7.json", "r.x.json", "other.json", "other.json.31", "other.json.x"] {
            std::fs::write(dir.join(name), "{}").unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            reports_matching(&dir.join(pattern))
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names("r.%p.json"), ["r.12.json", "r.7.json"]);
        assert_eq!(names("other.json"), ["other.json", "other.json.31"]);
        // Names are compared as bytes: `\xff` is not `\xe9`, though neither is UTF-8.
        let latin1 = |name: &[u8]| dir.join(std::ffi::OsStr::from_bytes(name));
        std::fs::write(latin1(b"caf\xe9.5.json"), "{}").unwrap();
        std::fs::write(latin1(b"caf\xff.6.json"), "{}").unwrap();
        assert_eq!(reports_matching(&latin1(b"caf\xe9.%p.json")), [latin1(b"caf\xe9.5.json")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn preload_keeps_existing_entries_after_the_shim() {
        let shim = Path::new("/x/libstreamsan_shim.so");
        assert_eq!(preload_value(shim, None), "/x/libstreamsan_shim.so");
        assert_eq!(preload_value(shim, Some("".into())), "/x/libstreamsan_shim.so");
        assert_eq!(preload_value(shim, Some("/a.so".into())), "/x/libstreamsan_shim.so:/a.so");
    }
}
