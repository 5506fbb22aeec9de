//! The JSON report: one document per process, described by `reports/schema.json`.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One process's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always "streamsan".
    pub tool: String,
    pub version: String,
    pub pid: u32,
    /// The process's command line.
    pub command: Vec<String>,
    /// Calls intercepted, by exported driver name.
    pub intercepted: BTreeMap<String, u64>,
    /// Hooked names for which `cuGetProcAddress` returned a pointer streamsan could not
    /// place: the program calls those functions unseen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unrecognised_proc_addresses: BTreeMap<String, u64>,
}

impl Report {
    /// An empty report for this process.
    pub fn new(pid: u32, command: Vec<String>) -> Report {
        Report {
            tool: "streamsan".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid,
            command,
            ..Report::default()
        }
    }

    /// Writes the report to `path` atomically: a reader sees the old document or the new one.
    pub fn write_to(&self, path: &Path) -> io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, text + "\n")?;
        std::fs::rename(&tmp, path)
    }

    /// Reads a report.
    pub fn read_from(path: &Path) -> io::Result<Report> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}
