//! The JSON report: one document per process, described by `reports/schema.json`.
//!
//! [`build`] turns what the model found into this document; [`text`] renders it the way
//! ThreadSanitizer prints its warnings. The document is plain data: the `streamsan report`
//! command and the test harness read it back with the same types.

pub mod build;
pub mod file;
pub mod merge;
pub mod text;

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
}

/// Races by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Entries in `races`.
    pub races: u64,
    /// Occurrences, all entries together.
    pub occurrences: u64,
    /// Entries by race kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Entries left out by suppressions.
    #[serde(default)]
    pub suppressed: u64,
}

/// One race: two operations on one buffer, the first not ordered before the second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RaceReport {
    /// `use-before-alloc`, `use-after-free`, `free-race`, `cross-stream-race` or `host-race`.
    pub kind: String,
    /// For a cross-stream race and a host race: `RAW`, `WAR` or `WAW`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazard: Option<String>,
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
    /// The buffer's first byte, in hexadecimal.
    pub address: String,
    pub size: u64,
    /// `device`, `stream-ordered`, `managed`, `pinned-host`, ...
    pub kind: String,
    pub allocation: OpReport,
}

/// One operation as the program issued it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// The driver entry point, e.g. `cuLaunchKernel_ptsz`; `host` for the host's own load or
    /// store (a host race).
    pub api: String,
    /// The kernel, demangled, for a launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `alloc`, `free`, `read`, `write` or `read-write`.
    pub access: String,
    /// The bytes accessed, for a read or a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ByteRange>,
    pub stream: StreamReport,
    pub thread: ThreadReport,
    /// The call site, innermost frame first.
    pub site: Vec<Frame>,
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

/// The wait that is missing, in words and as data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    pub text: String,
    /// `record-and-wait`: record an event on `record_on` after `after`, make `wait_on` wait
    /// on it before `before`. `host-waits`: synchronize the host with `record_on` after
    /// `after`, before `before`. `free-after-use`: move the free after the use.
    pub action: String,
    pub record_on: String,
    pub after: String,
    pub wait_on: String,
    pub before: String,
}

/// A note: not a race.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteReport {
    /// `wait-on-unrecorded-event`, `graph-not-followed`, `destroyed-while-pending` or
    /// `host-guard-gave-up`.
    pub kind: String,
    pub message: String,
    pub count: u64,
    pub api: String,
    pub site: Vec<Frame>,
}

/// Whether a frame belongs to a library rather than to the program: a dependency (cargo's
/// registry, Python's site-packages), a standard library, the C runtime, the system.
fn is_library(frame: &Frame) -> bool {
    const FILES: [&str; 5] = ["/.cargo/registry/", "/rustc/", "/site-packages/", "/dist-packages/", "/lib/python3"];
    const MODULES: [&str; 6] = ["libc.so", "libstdc++", "libgcc_s", "ld-linux", "libpthread", "libdl"];
    let file = frame.file.as_deref().unwrap_or("");
    let module = frame.module.as_deref().unwrap_or("");
    let module = module.rsplit('/').next().unwrap_or(module);
    FILES.iter().any(|part| file.contains(part))
        || file.starts_with("/usr/")
        || file.starts_with('<')
        || MODULES.iter().any(|m| module.starts_with(m))
}

/// Whether a frame is in CUDA's own libraries (runtime, driver, math libraries), which say
/// how the driver was reached, not who asked.
fn is_cuda_library(frame: &Frame) -> bool {
    const MODULES: [&str; 12] = [
        "libcuda.", "libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusparse", "libcusolver",
        "libnccl", "libnvrtc", "libnvJitLink", "libstreamsan",
    ];
    let module = frame.module.as_deref().unwrap_or("");
    let module = module.rsplit('/').next().unwrap_or(module);
    MODULES.iter().any(|m| module.starts_with(m))
}

/// The frame that says where in the program's own code a call was made: the innermost
/// Python frame beside the script (under the directory of the outermost Python frame outside
/// libraries: a package put on `PYTHONPATH` or installed with `pip --target` is not in
/// `site-packages`, yet it is not the program), else the innermost Python frame outside
/// libraries, else the innermost native frame with a source file outside libraries, else
/// the innermost frame with a source file, else the innermost named frame outside CUDA's
/// libraries (a framework's function, when a thread of its own made the call), else the
/// innermost frame.
pub fn program_frame(site: &[Frame]) -> Option<&Frame> {
    let own = |f: &&Frame| f.file.is_some() && !is_library(f);
    let python = |f: &&Frame| f.module.as_deref() == Some(PYTHON_MODULE);
    let named_caller = |f: &&Frame| f.function.is_some() && !is_cuda_library(f);
    let script_dir = site.iter().rev().find(|f| python(f) && own(f)).and_then(|f| Path::new(f.file.as_deref()?).parent());
    let beside_script = |f: &&Frame| python(f) && script_dir.is_some_and(|dir| f.file.as_deref().is_some_and(|file| Path::new(file).starts_with(dir)));
    site.iter()
        .find(beside_script)
        .or_else(|| site.iter().find(|f| python(f) && own(f)))
        .or_else(|| site.iter().find(|f| python(f)))
        .or_else(|| site.iter().find(own))
        .or_else(|| site.iter().find(|f| f.file.is_some()))
        .or_else(|| site.iter().find(named_caller))
        .or(site.first())
}

/// The `module` of a Python frame.
pub const PYTHON_MODULE: &str = "python";

/// A call site in one line: `file:line in function` of its [`program_frame`].
pub fn describe_site(site: &[Frame]) -> String {
    let frame = program_frame(site);
    match frame {
        Some(f) => {
            let function = f.function.as_deref().unwrap_or("<unknown>");
            match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{file}:{line} in {function}"),
                (Some(file), None) => format!("{file} in {function}"),
                _ => format!("{function} ({})", f.module.as_deref().unwrap_or(&f.address)),
            }
        }
        None => "(no call site)".into(),
    }
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

    /// Reads a report; a file that is not one (truncated, corrupt, another tool's) is an
    /// `InvalidData` error that says where it went wrong.
    pub fn read_from(path: &Path) -> io::Result<Report> {
        let text = std::fs::read_to_string(path)?;
        let report: Report = serde_json::from_str(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not a streamsan report ({e})")))?;
        if report.tool != "streamsan" {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("not a streamsan report (tool {:?})", report.tool)));
        }
        Ok(report)
    }

    /// Leaves out the races `suppressions` suppress, counting them in the summary.
    pub fn suppress(&mut self, suppressions: &crate::suppressions::Suppressions) {
        let before = self.races.len();
        self.races.retain(|race| !suppressions.suppresses(race));
        let suppressed = self.summary.suppressed + (before - self.races.len()) as u64;
        self.summarize();
        self.summary.suppressed = suppressed;
    }

    /// The races of one kind.
    pub fn races_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a RaceReport> + 'a {
        self.races.iter().filter(move |r| r.kind == kind)
    }

    /// Recomputes `summary` from `races` (keeping the count of suppressed ones).
    pub fn summarize(&mut self) {
        let mut summary = Summary { races: self.races.len() as u64, suppressed: self.summary.suppressed, ..Summary::default() };
        for race in &self.races {
            summary.occurrences += race.count;
            *summary.by_kind.entry(race.kind.clone()).or_insert(0) += 1;
        }
        self.summary = summary;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: Option<&str>, module: Option<&str>) -> Frame {
        Frame {
            address: "0x0".into(),
            function: Some(function.into()),
            file: file.map(String::from),
            line: Some(1),
            module: module.map(String::from),
        }
    }

    #[test]
    fn the_program_frame_skips_libraries() {
        let rust = [
            frame("cuLaunchKernel", Some("/root/.cargo/registry/src/x/cudarc/src/sys.rs"), None),
            frame("call_once", Some("/rustc/abc/library/core/src/ops.rs"), None),
            frame("main", Some("/work/app/src/main.rs"), None),
        ];
        assert_eq!(program_frame(&rust).unwrap().function.as_deref(), Some("main"));
        let python = [
            frame("launchKernel", Some("/work/cupy/driver.cpp"), None),
            frame("forward", Some("/venv/lib/python3.12/site-packages/torch/nn/linear.py"), Some(PYTHON_MODULE)),
            frame("train", Some("/work/train.py"), Some(PYTHON_MODULE)),
        ];
        assert_eq!(program_frame(&python).unwrap().function.as_deref(), Some("train"));
        assert_eq!(describe_site(&python), "/work/train.py:1 in train");
        // A package outside site-packages (PYTHONPATH, pip --target): the script's line.
        let beside = [
            frame("copy", Some("/tmp/site/warp/context.py"), Some(PYTHON_MODULE)),
            frame("step", Some("/work/app/lib/steps.py"), Some(PYTHON_MODULE)),
            frame("<module>", Some("/work/app/main.py"), Some(PYTHON_MODULE)),
        ];
        assert_eq!(program_frame(&beside).unwrap().function.as_deref(), Some("step"));
        assert_eq!(program_frame(&beside[..1]).unwrap().function.as_deref(), Some("copy"));
        let bare = [frame("libcudart_static", None, None)];
        assert_eq!(program_frame(&bare).unwrap().function.as_deref(), Some("libcudart_static"));
        // A framework's own thread (PyTorch's autograd engine): no Python, no source files.
        let no_lines = |function: &str, module: &str| Frame { file: None, line: None, ..frame(function, None, Some(module)) };
        let engine = [
            Frame { function: None, ..no_lines("", "/venv/nvidia/cu13/lib/libcudart.so.13") },
            no_lines("cudaLaunchKernel", "/venv/nvidia/cu13/lib/libcudart.so.13"),
            no_lines("at::native::nll_loss_backward_out_cuda_template", "/venv/torch/lib/libtorch_cuda.so"),
        ];
        assert_eq!(describe_site(&engine), "at::native::nll_loss_backward_out_cuda_template (/venv/torch/lib/libtorch_cuda.so)");
    }
}
