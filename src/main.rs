//! The `streamsan` command: `run` a program under the shim, or render and merge `report`s.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};

use streamsan::cli::{signals, start};
use streamsan::options::{shown_path, Flag, Options, DEFAULT_REPORT};
use streamsan::report::file::check_destination;
use streamsan::report::run::{self, Entry, Processes, RunLog};
use streamsan::report::sink::Policy;
use streamsan::report::suppressions::Suppressions;
use streamsan::report::{merge, sarif, text, timeline, RaceKind, Report, Summary};

/// The help: `run`'s flags and the `STREAMSAN_OPTIONS` form come from the options table,
/// `--kind`'s names from the race kinds.
fn usage() -> String {
    let flags = Options::flags();
    let run_flags: String = flags.iter().map(|f| format!("  {:<22} {}\n", f.usage(), f.help)).collect();
    let env: Vec<String> = flags.iter().map(Flag::env_usage).collect();
    format!(
        "usage: streamsan run [OPTIONS] -- PROGRAM [ARGS...]
       streamsan report [--format text|json|sarif] [--timeline FILE] [--kind KIND]...
                        [--suppressions FILE] REPORT...

run: runs PROGRAM with the streamsan shim preloaded; each process that calls the CUDA
driver writes a JSON race report ({DEFAULT_REPORT} unless --report says otherwise). Exit
status: the program's own when it is not 0, else the --exitcode when any process of the
run found races or could not write its report. Signals sent to streamsan (TERM, INT, HUP,
QUIT) go on to the program; streamsan then ends as the program did.
{run_flags}The same options, for a shim preloaded by hand:
  STREAMSAN_OPTIONS={}

report: prints reports (merged, races seen twice counted once) and exits 1 while any race
remains, 0 when none does, 2 when a report cannot be read or the command line is wrong.
  --format text|json|sarif
                         a ThreadSanitizer-style listing (default), the merged report, or
                         SARIF 2.1.0 for code scanning (one result per race)
  --timeline FILE        also write each race as a trace for Perfetto or chrome://tracing
                         (docs/timeline.md)
  --kind KIND            only races of this kind ({}); may be repeated
  --suppressions FILE    leave out the races this file suppresses",
        env.join(":"),
        RaceKind::names()
    )
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("run") => run(&args[1..]),
        Some("report") => report(&args[1..]),
        Some("--help" | "-h" | "help") => help(),
        Some("--version" | "-V") => {
            println!("streamsan {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("expected a command"),
    }
}

fn help() -> ExitCode {
    println!("{}", usage());
    ExitCode::SUCCESS
}

fn usage_error(why: &str) -> ExitCode {
    eprintln!("streamsan: {why}\n{}", usage());
    ExitCode::from(2)
}

fn error(why: &str) -> ExitCode {
    eprintln!("streamsan: {why}");
    ExitCode::from(2)
}

/// The flags of a command line: before `--` (or, for `run`, before the program).
struct Flags<'a> {
    args: &'a [OsString],
    next: usize,
    /// Whether `--` was passed: what follows is not a flag.
    ended: bool,
    /// The value written into the last flag, `--report=x.json`.
    inline: Option<&'a OsStr>,
}

impl<'a> Flags<'a> {
    fn new(args: &'a [OsString]) -> Flags<'a> {
        Flags { args, next: 0, ended: false, inline: None }
    }

    /// The next flag (its name, for `--name=value`), or None at `--` or at an argument that
    /// is not a flag.
    fn flag(&mut self) -> Option<&'a str> {
        if self.ended {
            return None;
        }
        let arg = self.args.get(self.next)?;
        let bytes = arg.as_bytes();
        if bytes == b"--" {
            self.next += 1;
            self.ended = true;
            return None;
        }
        if !bytes.starts_with(b"-") || bytes == b"-" {
            return None;
        }
        let (name, inline) = match bytes.iter().position(|&b| b == b'=') {
            Some(at) if bytes.starts_with(b"--") => (&bytes[..at], Some(OsStr::from_bytes(&bytes[at + 1..]))),
            _ => (bytes, None),
        };
        let name = std::str::from_utf8(name).ok()?;
        self.next += 1;
        self.inline = inline;
        Some(name)
    }

    /// Whether the last flag was given a value with `=`.
    fn has_inline_value(&self) -> bool {
        self.inline.is_some()
    }

    /// The next argument that is not a flag, when [`Flags::flag`] returned None.
    fn operand(&mut self) -> Option<&'a OsString> {
        let arg = self.args.get(self.next)?;
        self.next += 1;
        Some(arg)
    }

    /// The value of `flag`, as given (a path need not be UTF-8).
    fn value_os(&mut self, flag: &str) -> Result<&'a OsStr, String> {
        if let Some(value) = self.inline.take() {
            return Ok(value);
        }
        let value = self.args.get(self.next).filter(|v| *v != "--").ok_or(format!("{flag} needs a value"))?;
        self.next += 1;
        Ok(value)
    }

    /// The value of `flag`, which must be text.
    fn value(&mut self, flag: &str) -> Result<&'a str, String> {
        let value = self.value_os(flag)?;
        value.to_str().ok_or_else(|| format!("{flag} {}: the value is not valid UTF-8", shown_path(value)))
    }

    /// What follows the flags (for `run`: the program and its arguments).
    fn rest(&self) -> &'a [OsString] {
        &self.args[self.next.min(self.args.len())..]
    }
}

// ---- streamsan run ----------------------------------------------------------------------

fn run(args: &[OsString]) -> ExitCode {
    // STREAMSAN_OPTIONS first, the command line over it.
    let mut options = match Options::from_env() {
        Ok(options) => options,
        Err(e) => return error(&format!("STREAMSAN_OPTIONS: {e}")),
    };
    let table = Options::flags();
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.flag() {
        if matches!(flag, "--help" | "-h") {
            return help();
        }
        let Some(option) = table.iter().find(|f| f.name == flag) else {
            return usage_error(&format!("unknown option {flag}"));
        };
        let value = match (option.takes_value(), flags.has_inline_value()) {
            (true, _) => flags.value_os(flag),
            (false, false) => Ok(OsStr::new(option.switched)),
            (false, true) => Err(format!("{flag} takes no value")),
        };
        if let Err(why) = value.and_then(|v| options.set(option.key, v).map_err(|e| e.to_string())) {
            return usage_error(&why);
        }
    }
    let Some((program, program_args)) = flags.rest().split_first() else {
        return usage_error("no program to run");
    };
    // Mistakes stop the run before the program starts.
    if let Some(file) = &options.suppressions {
        if let Err(e) = Suppressions::load(file) {
            return error(&e.to_string());
        }
        // The program may change directory: give it the file's full path.
        if let Ok(path) = std::path::absolute(file) {
            options.suppressions = Some(path);
        }
    }
    if let Err(why) = check_destination(&options.log_path) {
        return error(&why);
    }
    if let Ok(path) = std::path::absolute(&options.log_path) {
        options.log_path = path;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return error(&format!("cannot find my own executable: {e}")),
    };
    let shim = match start::find_shim(&exe) {
        Ok(shim) => shim,
        Err(why) => return error(&why),
    };
    let run_log = match RunLog::create() {
        Ok(log) => log,
        Err(e) => {
            return error(&format!(
                "cannot create the run's list of reports in {}: {e}",
                std::env::temp_dir().display()
            ))
        }
    };
    let before = start::reports_matching(&options.log_path);
    let mut command = start::command(&shim, &options, program, program_args);
    command.env(run::ENV, run_log.path());
    let status = match signals::run(&mut command) {
        Ok(status) => status,
        Err(e) => {
            run_log.remove();
            eprintln!("streamsan: cannot run {}: {e}", shown_path(program));
            // As shells do: 127 for a program not found, 126 for one found that cannot run.
            return ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
        }
    };
    // The reports the run's processes listed, and any new file at the pattern (a process
    // that could not reach the list, in a sandbox with a /tmp of its own).
    let mut entries = run_log.read();
    let processes = run_log.processes();
    run_log.remove();
    for path in start::reports_matching(&options.log_path) {
        if !before.contains(&path) && !entries.iter().any(|e| e.path() == path) {
            entries.push(Entry::Written(path));
        }
    }
    let mut outcome = Outcome::of(&entries);
    outcome.unchecked(&processes, &shim);
    outcome.print_errors();
    if !options.quiet {
        outcome.summarize(status);
    }
    if status.code() == Some(0) && options.exitcode != 0 && outcome.failed() {
        // The program claims success, but one of its processes found races (the launcher
        // may have swallowed the worker's status) or could not report.
        return ExitCode::from(options.exitcode as u8);
    }
    exit_like(status)
}

/// What the processes of a run reported.
struct Outcome {
    /// The reports read back, with their paths.
    read: Vec<(PathBuf, Report)>,
    /// What went wrong: reports that could not be written or read.
    errors: Vec<String>,
    /// Races in reports that could not be written (they went to stderr).
    unwritten_races: u64,
}

impl Outcome {
    fn of(entries: &[Entry]) -> Outcome {
        let mut outcome = Outcome { read: Vec::new(), errors: Vec::new(), unwritten_races: 0 };
        for entry in entries {
            match entry {
                Entry::Written(path) => match Report::read_from(path) {
                    Ok(report) => outcome.read.push((path.clone(), report)),
                    Err(e) => outcome.errors.push(format!("cannot read the report {}: {e}", shown_path(path))),
                },
                Entry::Unwritten { races, why, .. } => {
                    outcome.unwritten_races += races;
                    outcome.errors.push(format!(
                        "{why}; its {races} race{} went to the program's stderr",
                        if *races == 1 { "" } else { "s" }
                    ));
                }
            }
        }
        outcome
    }

    /// What the run's list says of processes left unchecked: the shim never loaded, a
    /// program `exec`ed without it when nothing else called the driver, a process still
    /// running whose report may not be whole. Each is an error: a run that checked nothing
    /// must not read as a clean one.
    fn unchecked(&mut self, processes: &Processes, shim: &Path) {
        if processes.loaded.is_empty() && self.read.is_empty() && self.errors.is_empty() {
            self.errors.push(format!(
                "the shim {} was not loaded into the program, so nothing was checked (a program that \
                 clears LD_PRELOAD or its environment, is statically linked or is setuid runs without it)",
                shim.display()
            ));
            return;
        }
        for (pid, program) in &processes.dropped {
            let why = format!("process {pid} started {program} with an environment that no longer preloads the shim");
            if processes.called.is_empty() {
                self.errors.push(format!("{why}, so nothing was checked"));
            } else {
                eprintln!("streamsan: note: {why}: it was not checked");
            }
        }
        let mut called = processes.called.clone();
        called.sort_unstable();
        called.dedup();
        for pid in called.into_iter().filter(|&pid| running(pid)) {
            self.errors.push(format!(
                "process {pid} called the driver and is still running: its races since its report was last written are not in this summary"
            ));
        }
    }

    /// Whether the run must not pass: races found, or reports lost.
    fn failed(&self) -> bool {
        !self.errors.is_empty() || self.read.iter().any(|(_, r)| !r.races.is_empty())
    }

    /// What went wrong: reports that could not be written or read (printed even with
    /// `--quiet`, which hides all but errors).
    fn print_errors(&self) {
        for why in &self.errors {
            eprintln!("streamsan: error: {why}");
        }
    }

    /// The lines after the run: the races of all its processes and where their reports are.
    fn summarize(&self, status: ExitStatus) {
        if self.read.is_empty() {
            if !self.errors.is_empty() {
                return;
            }
            match status.signal() {
                Some(signal) => eprintln!(
                    "streamsan: no report: the program was killed by signal {signal} before it could write one"
                ),
                None => eprintln!("streamsan: no report: {}", why_no_report()),
            }
            return;
        }
        let reports: Vec<Report> = self.read.iter().map(|(_, r)| r.clone()).collect();
        let merged = merge::merge(&reports);
        let names: Vec<String> = self.read.iter().map(|(p, _)| shown_path(p)).collect();
        eprintln!(
            "{} in {} report{}: {}",
            text::summary(&merged),
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
    }
}

/// Whether process `pid` exists and has not ended (a zombie has).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Exits as the program did: with its status, or of its signal.
fn exit_like(status: ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    // The program died of a signal: die of the same one, so that whoever started
    // streamsan sees what it would have seen without it.
    let signal = status.signal().unwrap_or(libc::SIGKILL);
    // SAFETY: restoring the default action and raising a signal in our own process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    ExitCode::from(128 + signal as u8)
}

/// Why a run left no report: the process made no driver call, perhaps for want of a driver.
fn why_no_report() -> String {
    let path = std::env::var_os("STREAMSAN_REAL_LIBCUDA")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "libcuda.so.1".to_string());
    let c_path = std::ffi::CString::new(path.clone()).unwrap_or_default();
    // SAFETY: a NUL-terminated path; the handle is closed at once.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local message or null.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            String::from("not found")
        } else {
            unsafe { std::ffi::CStr::from_ptr(why) }.to_string_lossy().into_owned()
        };
        format!("no CUDA driver could be loaded ({why}), so the program made no driver call")
    } else {
        // SAFETY: the handle opened above.
        unsafe { libc::dlclose(handle) };
        "the program made no CUDA driver call".to_string()
    }
}

// ---- streamsan report -------------------------------------------------------------------

fn report(args: &[OsString]) -> ExitCode {
    let mut format = String::from("text");
    let mut timeline_path: Option<PathBuf> = None;
    let mut kinds: Vec<RaceKind> = Vec::new();
    let mut suppressions = Suppressions::default();
    // Flags anywhere, as people type them (`streamsan report r.json --kind free-race`);
    // after `--`, only files.
    let mut paths: Vec<&OsString> = Vec::new();
    let mut flags = Flags::new(args);
    loop {
        let Some(flag) = flags.flag() else {
            match flags.operand() {
                Some(path) => {
                    paths.push(path);
                    continue;
                }
                None => break,
            }
        };
        let set = match flag {
            "--format" => flags.value(flag).and_then(|v| match v {
                "json" | "text" | "sarif" => {
                    format = v.to_string();
                    Ok(())
                }
                _ => Err(format!("--format takes text, json or sarif, not {v:?}")),
            }),
            "--timeline" => flags.value_os(flag).map(|v| timeline_path = Some(PathBuf::from(v))),
            "--kind" => flags.value(flag).and_then(|v| {
                kinds.push(v.parse()?);
                Ok(())
            }),
            "--suppressions" => flags.value_os(flag).and_then(|v| {
                suppressions = Suppressions::load(Path::new(v)).map_err(|e| e.to_string())?;
                Ok(())
            }),
            "--help" | "-h" => return help(),
            other => Err(format!("unknown option {other}")),
        };
        if let Err(why) = set {
            return usage_error(&why);
        }
    }
    if paths.is_empty() {
        return usage_error("no report to read");
    }
    if paths.len() == 1 && format == "text" && timeline_path.is_none() {
        return print_streaming(paths[0], &kinds, &suppressions);
    }
    let mut reports = Vec::new();
    for path in &paths {
        match Report::read_from(path.as_ref()) {
            Ok(report) => reports.push(report),
            Err(e) => return error(&format!("{}: {e}", shown_path(path))),
        }
    }
    // One report is written back as it was, less what is filtered out; several are merged.
    let mut merged = match <[Report; 1]>::try_from(reports) {
        Ok([one]) => one,
        Err(reports) => merge::merge(&reports),
    };
    if !kinds.is_empty() {
        merged.races.retain(|r| kinds.contains(&r.kind));
        merged.summarize();
    }
    Policy::suppressing(suppressions).apply(&mut merged);
    if let Some(path) = timeline_path {
        let written = serde_json::to_string(&timeline::trace(&merged)).map_err(std::io::Error::from);
        if let Err(e) = written.and_then(|trace| std::fs::write(&path, trace + "\n")) {
            return error(&format!("cannot write the timeline {}: {e}", shown_path(&path)));
        }
    }
    let rendered = match format.as_str() {
        "json" => serde_json::to_string_pretty(&merged),
        "sarif" => serde_json::to_string_pretty(&sarif::log(&merged)),
        _ => Ok(text::report(&merged)),
    };
    let output = match rendered {
        Ok(text) if format == "text" => text,
        Ok(text) => text + "\n",
        Err(e) => return error(&format!("cannot render the report: {e}")),
    };
    let status = if merged.races.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    match std::io::stdout().lock().write_all(output.as_bytes()) {
        // A reader that stopped early (`| head`) is not an error, as for any Unix tool: the
        // status still says whether races remain.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => error(&format!("cannot print the report: {e}")),
        _ => status,
    }
}

/// One report as text, each race printed as it is read: the first lines of a large report
/// come at once, and memory holds one race.
fn print_streaming(path: &OsString, kinds: &[RaceKind], suppressions: &Suppressions) -> ExitCode {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut summary = Summary::default();
    let mut printed_any = false;
    let read = Report::each_race_from(Path::new(path), &mut |race| {
        if !kinds.is_empty() && !kinds.contains(&race.kind) {
            return Ok(());
        }
        if suppressions.suppresses(&race) {
            summary.suppressed += 1;
            return Ok(());
        }
        summary.races += 1;
        summary.occurrences += race.count;
        *summary.by_kind.entry(race.kind).or_insert(0) += 1;
        out.write_all(text::race(&race).as_bytes())?;
        if !printed_any {
            printed_any = true;
            out.flush()?;
        }
        Ok(())
    });
    let printed = read.and_then(|mut report| {
        summary.suppressed += report.summary.suppressed;
        report.summary = summary;
        out.write_all(text::after_races(&report).as_bytes())?;
        out.flush()?;
        Ok(report.summary.races)
    });
    match printed {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        // A reader that stopped early (`| head`) is not an error, as for any Unix tool.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(1),
        Err(e) => error(&format!("{}: {e}", shown_path(path))),
    }
}
