//! Shared by the integration tests: build the shim, the stand-in driver and the test
//! programs, and run a program under `streamsan run` against the stand-in.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use streamsan::report::Report;

/// `target/<profile>`, where cargo put this test binary's siblings.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps").to_path_buf()
}

/// Builds the workspace members the tests run (once per test binary) and returns the
/// profile directory that holds them.
pub fn artifacts() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = profile_dir();
        let target = dir.parent().expect("target dir");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "build",
                "--quiet",
                "-p",
                "streamsan-shim",
                "-p",
                "streamsan-standin",
                "-p",
                "streamsan-nccl-standin",
                "-p",
                "streamsan-standin-sanitizer",
            ])
            .args(["-p", "streamsan-fidelity", "-p", "streamsan-cudarc-app"])
            .arg("--target-dir")
            .arg(target);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "building the shim and the stand-in failed");
        // The stand-ins answer to the driver's and NCCL's names.
        let driver = dir.join("standin-driver");
        std::fs::create_dir_all(&driver).unwrap();
        for (name, standin) in [
            ("libcuda.so.1", "libcuda_standin.so"),
            ("libcuda.so", "libcuda_standin.so"),
            ("libnccl.so.2", "libnccl_standin.so"),
            ("libnccl.so", "libnccl_standin.so"),
        ] {
            let link = driver.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(dir.join(standin), &link).unwrap();
        }
        dir
    })
}

/// The directory holding the stand-ins as `libcuda.so.1` and `libnccl.so.2`.
pub fn driver_dir() -> PathBuf {
    artifacts().join("standin-driver")
}

pub fn shim() -> PathBuf {
    artifacts().join("libstreamsan_shim.so")
}

/// The stand-in Compute Sanitizer library (`tests/standin-sanitizer`).
pub fn standin_sanitizer() -> PathBuf {
    artifacts().join("libsanitizer_standin.so")
}

/// Compiles `tests/scenarios/<name>.c` (with `extra` flags) and returns the executable.
pub fn compile_c(name: &str, extra: &[&str]) -> PathBuf {
    compile_c_as(name, name, extra)
}

/// The C files of `tests/scenarios/<source>`: `<source>.c`, or every `.c` of the folder
/// `<source>/` for a program of several files.
fn c_sources(source: &str) -> Vec<PathBuf> {
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let folder = scenarios.join(source);
    if !folder.is_dir() {
        return vec![scenarios.join(format!("{source}.c"))];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    files
}

/// Compiles `tests/scenarios/<source>.c` (or the folder `<source>/`) into `<output>` (an
/// executable, or a library when `extra` says `-shared`), once per test process: tests
/// running in parallel share it.
pub fn compile_c_as(source: &str, output: &str, extra: &[&str]) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let out_dir = artifacts().join("scenarios");
    let exe = out_dir.join(output);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.iter().any(|o| o == output) {
        return exe;
    }
    std::fs::create_dir_all(&out_dir).unwrap();
    // Build beside, then rename: another test process may be running the old one.
    let tmp = out_dir.join(format!(".{output}.{}", std::process::id()));
    let result = Command::new("cc")
        .args(["-O1", "-g", "-Wall", "-o"])
        .arg(&tmp)
        .args(c_sources(source))
        .args(extra)
        .output()
        .expect("run cc");
    assert!(result.status.success(), "cc {source} failed:\n{}", String::from_utf8_lossy(&result.stderr));
    std::fs::rename(&tmp, &exe).unwrap();
    built.push(output.to_string());
    exe
}

/// `-L<stand-in> -lcuda`: link against the stand-in as against libcuda.
pub fn link_cuda() -> Vec<String> {
    vec![format!("-L{}", driver_dir().display()), "-lcuda".into()]
}

/// `cmd` with SIGINT and SIGQUIT at their default actions, whatever this process has: a
/// shell starts a background command (`cargo test &`) with both ignored, and its children
/// inherit that, so a test that sends or raises one would find it ignored.
pub fn with_default_interrupts(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, as between fork and exec must be.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        })
    }
}

/// A fresh directory for one run's files.
/// They lie under `test-runs/<pid>`, removed when the test binary exits unless
/// `STREAMSAN_KEEP_TEST_RUNS` is set (to look at a failure's files).
pub fn scratch(label: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    static RUNS: OnceLock<PathBuf> = OnceLock::new();
    let runs = RUNS.get_or_init(|| {
        extern "C" fn remove_runs() {
            if let Some(runs) = RUNS.get() {
                let _ = std::fs::remove_dir_all(runs);
            }
        }
        if std::env::var_os("STREAMSAN_KEEP_TEST_RUNS").is_none() {
            // SAFETY: registering a function without arguments, run once at exit.
            unsafe { libc::atexit(remove_runs) };
        }
        artifacts().join("test-runs").join(std::process::id().to_string())
    });
    let dir = runs.join(format!("{label}-{}", N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What one run under streamsan left behind.
pub struct Run {
    pub output: Output,
    pub dir: PathBuf,
    /// The stand-in's log: one line per driver call it received.
    pub calls: Vec<String>,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The single report the run wrote.
    pub fn report(&self) -> Report {
        let reports = self.reports();
        assert_eq!(reports.len(), 1, "expected one report in {}", self.dir.display());
        reports.into_iter().next().unwrap()
    }

    pub fn reports(&self) -> Vec<Report> {
        let mut paths: Vec<_> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("report."))
            .collect();
        paths.sort();
        paths.iter().map(|p| Report::read_from(p).expect("readable report")).collect()
    }

    /// Calls of the intercepted name `name`, per the report.
    pub fn intercepted(&self, name: &str) -> u64 {
        self.report().intercepted.get(name).copied().unwrap_or(0)
    }

    /// How many times the stand-in received `name`.
    pub fn received(&self, name: &str) -> usize {
        let prefix = format!("{name}(");
        self.calls.iter().filter(|l| l.starts_with(&prefix)).count()
    }

    /// Every report of the run validates against `docs/report/schema.json`.
    pub fn assert_reports_match_the_schema(&self) {
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with("report.") {
                assert_matches_schema(&path);
            }
        }
    }

    /// The program ran to its end: exit status 0, or 66 (streamsan's) when it reported races.
    pub fn assert_ran(&self) {
        let races = self.reports().iter().any(|r| !r.races.is_empty());
        let expected = if races { 66 } else { 0 };
        assert_eq!(
            self.output.status.code(),
            Some(expected),
            "exit {:?} (expected {expected}: races {races})\nstdout:\n{}\nstderr:\n{}",
            self.output.status,
            self.stdout(),
            self.stderr()
        );
    }
}

/// The count of a `--phase-times` row in `stderr`: the first field after its label.
pub fn phase_count(stderr: &str, label: &str) -> u64 {
    let row = stderr
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(label).filter(|rest| rest.starts_with(' ')))
        .unwrap_or_else(|| panic!("no row {label:?} in\n{stderr}"));
    row.split_whitespace().next().unwrap().parse().unwrap()
}

/// Options for [`run_with`].
#[derive(Default)]
pub struct RunOptions<'a> {
    pub env: Vec<(&'a str, String)>,
    /// Run without the shim: the same program, the same stand-in.
    pub native: bool,
}

/// Runs `program args` under `streamsan run` against the stand-in driver.
pub fn run(program: &Path, args: &[&str]) -> Run {
    run_with(program, args, RunOptions::default())
}

pub fn run_with(program: &Path, args: &[&str], options: RunOptions) -> Run {
    let dir = scratch(&program.file_name().unwrap().to_string_lossy());
    let log = dir.join("calls.log");
    let mut cmd = if options.native {
        Command::new(program)
    } else {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_streamsan"));
        cmd.arg("run").arg("--report").arg(dir.join("report.%p.json")).arg("--").arg(program);
        cmd.env("STREAMSAN_SHIM", shim());
        cmd
    };
    cmd.args(args)
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STANDIN_LOG", &log)
        .env_remove("STANDIN_FAIL")
        .env_remove("LD_PRELOAD")
        .env_remove("STREAMSAN_OPTIONS");
    for (k, v) in options.env {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("run program");
    let calls = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect();
    Run { output, dir, calls }
}

/// The `streamsan` command, set up like [`run`]'s (the shim, the stand-in, its call log in
/// `dir`), for a test that gives its own arguments.
pub fn streamsan(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_streamsan"));
    cmd.env("STREAMSAN_SHIM", shim())
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("STANDIN_LOG", dir.join("calls.log"))
        .env_remove("STANDIN_FAIL")
        .env_remove("LD_PRELOAD")
        .env_remove("STREAMSAN_OPTIONS");
    cmd
}

/// A program's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `--report` argument for one report per process in `dir`.
pub fn report_arg(dir: &Path) -> String {
    dir.join("report.%p.json").to_string_lossy().into_owned()
}

/// The lines of `dir`'s stand-in call log: empty when the program never reached the driver.
pub fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default().lines().map(str::to_string).collect()
}

/// `tests/scenarios/lifecycle.c`, built.
pub fn lifecycle() -> PathBuf {
    compile_c("lifecycle", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>())
}

/// `tests/scenarios/semantics/`, built.
pub fn semantics() -> PathBuf {
    let mut flags = link_cuda();
    flags.push("-lpthread".into());
    flags.push("-ldl".into());
    compile_c("semantics", &flags.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The reports in `dir` whose names start with `prefix`.
pub fn reports_in(dir: &Path, prefix: &str) -> Vec<(PathBuf, Report)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let report = Report::read_from(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, report)
        })
        .collect()
}

/// Validates a JSON file against `docs/report/schema.json`.
pub fn assert_matches_schema(path: &Path) {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report/schema.json");
        let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
        jsonschema::validator_for(&schema).expect("a valid JSON Schema")
    });
    let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let errors: Vec<String> =
        validator.iter_errors(&document).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{} does not match the schema:\n{}", path.display(), errors.join("\n"));
}

/// How long a program sent or raising a signal may take to end: past it, the test fails
/// rather than hangs.
pub const SIGNAL_BOUND: Duration = Duration::from_secs(30);

/// Waits for `child` at most [`SIGNAL_BOUND`]; one still running then is killed (SIGKILL)
/// and the test fails.
pub fn wait_bounded(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + SIGNAL_BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} still running after {SIGNAL_BOUND:?}: killed", child.id());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `command`'s output, as `Command::output` gives it, the program bounded as by [`wait_bounded`].
pub fn output_bounded(command: &mut Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let read = |mut from: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = from.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let status = wait_bounded(&mut child);
    Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// Waits at most [`SIGNAL_BOUND`] for process `pid`, not a child of this one, to be gone.
pub fn wait_gone(pid: i32) {
    let deadline = Instant::now() + SIGNAL_BOUND;
    // SAFETY: probing a pid with signal 0.
    while unsafe { libc::kill(pid, 0) } == 0 {
        if Instant::now() > deadline {
            // SAFETY: ending the process this test signalled.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("process {pid} still running after {SIGNAL_BOUND:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a report's only notes are that kernels stood on their parameters (no Compute
/// Sanitizer library here, which the default footprint mode says once).
pub fn no_notes_but_footprints(report: &Report) -> bool {
    report.notes.iter().all(|n| n.kind == "footprint-unavailable")
}
