//! streamsan-bench: what the shim adds to each driver call, against the stand-in driver.
//!
//! Each workload (`workloads.rs`) runs in a child process twice, natively and with the shim
//! preloaded: the same loop against the same stand-in, so that the difference of the two
//! runs' percentiles is streamsan's cost alone. The pairs of runs are repeated, interleaved,
//! one process each: a figure is the median over the pairs of (shim − native), with the
//! smallest and largest pair beside it as its spread. Writes `target/streamsan-bench.json`
//! and prints a table.
//!
//! Usage: streamsan-bench [--shim FILE] [--driver DIR] [--sanitizer FILE] [--out FILE] [--repeat N] [--only NAME,...]
//! With `--only`, prints the chosen workloads' figures, and writes them as JSON only where
//! `--out` says.
//! By default the shim, the stand-in, the stand-in NCCL (for the `_ddp` workload, left out
//! without a `libnccl.so.2` in the driver's folder) and the stand-in Compute Sanitizer
//! library (for the `footprint=learn` workloads, left out without it) are those beside this
//! executable; under `cargo run` they are built first.

mod driver;
mod measured;
mod scaling;
mod stacks;
mod training;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use workloads::WORKLOADS;

struct Args {
    shim: PathBuf,
    driver: PathBuf,
    /// The stand-in Compute Sanitizer library, if there is one.
    sanitizer: Option<PathBuf>,
    out: PathBuf,
    /// Whether `--out` was given.
    out_given: bool,
    repeat: usize,
    /// Workloads to run (all if empty): for profiling one; the summary needs them all.
    only: Vec<String>,
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, name] = argv.as_slice() {
        if flag == "--child" {
            return child(name);
        }
    }
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(why) => {
            eprintln!("streamsan-bench: {why}\nusage: streamsan-bench [--shim FILE] [--driver DIR] [--sanitizer FILE] [--out FILE] [--repeat N] [--only NAME,...]");
            std::process::exit(2);
        }
    };
    let names = WORKLOADS
        .iter()
        .map(|&(name, _)| name)
        .chain(python_available().then_some(PYTHON_WORKLOAD))
        .filter(|name| args.only.is_empty() || args.only.iter().any(|o| o == name))
        .filter(|name| match missing(&args, name) {
            Some(what) => {
                eprintln!("streamsan-bench: {name} left out: {what}");
                false
            }
            None => true,
        });
    let results: Vec<(&str, Runs)> = names
        .map(|name| {
            eprint!("streamsan-bench: {name} ");
            let runs = measure(&args, name);
            eprintln!();
            (name, runs)
        })
        .collect();
    let document = summarize(&results);
    if !args.only.is_empty() {
        for (name, runs) in &results {
            let (p50, p99, mean) = (runs.added(|s| s.p50), runs.added(|s| s.p99), runs.added(|s| s.mean));
            let growth: Vec<f64> = runs.shim.iter().filter_map(|s| s.resident_growth).collect();
            let growth = if growth.is_empty() {
                String::new()
            } else {
                format!(", resident growth {:.0} MB", median(&growth) / 1e6)
            };
            let apart = |what: &str, added: Option<Spread>| {
                added.map_or(String::new(), |a| format!(", {what} {:.0} ns [{:.0} .. {:.0}]", a.median, a.min, a.max))
            };
            let sync = apart("synchronize", runs.added_sync()) + &apart("all-reduce", runs.added_collective());
            println!(
                "{name}: added median {:.0} ns [{:.0} .. {:.0}], mean {:.0} ns [{:.0} .. {:.0}], p99 {:.0} ns [{:.0} .. {:.0}] ({} pairs){growth}{sync}",
                p50.median,
                p50.min,
                p50.max,
                mean.median,
                mean.min,
                mean.max,
                p99.median,
                p99.min,
                p99.max,
                runs.shim.len()
            );
        }
        if !args.out_given {
            return;
        }
    } else {
        print_table(&document);
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&document).unwrap() + "\n")
        .unwrap_or_else(|e| panic!("write {}: {e}", args.out.display()));
    println!("written to {}", args.out.display());
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let profile = exe.parent().ok_or("this executable has no directory")?.to_path_buf();
    let mut shim = None;
    let mut driver = None;
    let mut sanitizer = None;
    let mut out = profile.parent().unwrap_or(&profile).join("streamsan-bench.json");
    let mut out_given = false;
    let mut repeat = 5;
    let mut only = Vec::new();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--shim" => shim = Some(PathBuf::from(value()?)),
            "--driver" => driver = Some(PathBuf::from(value()?)),
            "--sanitizer" => sanitizer = Some(PathBuf::from(value()?)),
            "--out" => {
                out = PathBuf::from(value()?);
                out_given = true;
            }
            "--repeat" => repeat = value()?.parse().map_err(|_| "--repeat needs a number".to_string())?,
            "--only" => only = value()?.split(',').map(str::to_string).collect(),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if shim.is_none() && driver.is_none() {
        build_beside(&profile)?;
    }
    let shim = shim.unwrap_or_else(|| profile.join("libstreamsan_shim.so"));
    let driver = match driver {
        Some(dir) => dir,
        None => driver_dir(&profile)?,
    };
    for path in [&shim, &driver.join("libcuda.so.1")] {
        if !path.exists() {
            return Err(format!(
                "{} is missing (build the workspace with --release, or pass --shim/--driver)",
                path.display()
            ));
        }
    }
    if let Some(unknown) = only.iter().find(|o| *o != PYTHON_WORKLOAD && !WORKLOADS.iter().any(|(n, _)| n == o)) {
        return Err(format!("no workload {unknown:?}"));
    }
    let sanitizer = match sanitizer {
        Some(path) if !path.exists() => return Err(format!("{} is missing", path.display())),
        Some(path) => Some(path),
        None => Some(profile.join("libsanitizer_standin.so")).filter(|path| path.exists()),
    };
    Ok(Args { shim, driver, sanitizer, out, out_given, repeat: repeat.max(1), only })
}

/// What a workload needs and this run lacks, if anything: the stand-in Compute Sanitizer
/// library, or a `libnccl.so.2` beside the driver.
fn missing(args: &Args, name: &str) -> Option<String> {
    if workloads::needs_sanitizer(name) && args.sanitizer.is_none() {
        return Some("no stand-in Compute Sanitizer library (--sanitizer)".into());
    }
    if workloads::needs_nccl(name) && !args.driver.join("libnccl.so.2").exists() {
        return Some(format!("no libnccl.so.2 in {}", args.driver.display()));
    }
    None
}

/// Under `cargo run`, builds the shim, the stand-in and its Compute Sanitizer library into
/// this executable's profile.
fn build_beside(profile: &Path) -> Result<(), String> {
    let Some(cargo) = std::env::var_os("CARGO") else { return Ok(()) };
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet"]);
    for package in ["streamsan-shim", "streamsan-standin", "streamsan-nccl-standin", "streamsan-standin-sanitizer"] {
        cmd.args(["-p", package]);
    }
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    if let Some(target) = profile.parent() {
        cmd.arg("--target-dir").arg(target);
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        _ => Err("building the shim and the stand-in failed".into()),
    }
}

/// A directory where the stand-in answers to `libcuda.so.1`, and the stand-in NCCL, where
/// it was built, to `libnccl.so.2`.
fn driver_dir(profile: &Path) -> Result<PathBuf, String> {
    let dir = profile.join("bench-driver");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    for (name, library) in [("libcuda.so.1", "libcuda_standin.so"), ("libnccl.so.2", "libnccl_standin.so")] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        // One not built is missing from the folder: the caller says so of the driver, and
        // leaves out the workloads that need NCCL.
        if profile.join(library).exists() {
            std::os::unix::fs::symlink(profile.join(library), &link)
                .map_err(|e| format!("link {}: {e}", link.display()))?;
        }
    }
    Ok(dir)
}

/// Figures of one workload run, as the child reports them.
#[derive(Clone, Copy, Default)]
struct Stats {
    p50: f64,
    p99: f64,
    /// The mean: what a program pays per call, work the shim puts off to a later call
    /// (its batch of launches) included, where the percentiles of single calls miss it.
    mean: f64,
    buffer_bytes: f64,
    resident_growth: Option<f64>,
    /// The median synchronize, where the workload times them apart...
    sync_p50: Option<f64>,
    /// ...and the median collective.
    collective_p50: Option<f64>,
}

/// A median of calls a workload timed apart ([`Stats::sync_p50`], [`Stats::collective_p50`]).
type TimedApart = fn(&Stats) -> Option<f64>;

/// The runs of one workload, natively and under the shim, pair by pair.
struct Runs {
    native: Vec<Stats>,
    shim: Vec<Stats>,
}

/// A figure over the pairs of runs: its median and its spread.
#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Spread { median: median(values), min, max }
    }

    fn json(self) -> Value {
        json!({ "median": self.median.round(), "min": self.min.round(), "max": self.max.round() })
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

impl Runs {
    /// What the shim added to a statistic, pair by pair.
    fn added(&self, p: fn(&Stats) -> f64) -> Spread {
        let added: Vec<f64> = self.native.iter().zip(&self.shim).map(|(n, s)| p(s) - p(n)).collect();
        Spread::of(&added)
    }

    /// What the shim added to the median synchronize, where the workload timed them apart.
    fn added_sync(&self) -> Option<Spread> {
        self.added_apart(|s| s.sync_p50)
    }

    /// What the shim added to the median collective, where the workload timed them apart.
    fn added_collective(&self) -> Option<Spread> {
        self.added_apart(|s| s.collective_p50)
    }

    /// What the shim added to a median of calls timed apart, if every run timed them.
    fn added_apart(&self, p: TimedApart) -> Option<Spread> {
        let added: Option<Vec<f64>> = self.native.iter().zip(&self.shim).map(|(n, s)| Some(p(s)? - p(n)?)).collect();
        added.map(|added| Spread::of(&added))
    }

    fn median_of(runs: &[Stats], p: fn(&Stats) -> f64) -> f64 {
        median(&runs.iter().map(p).collect::<Vec<_>>())
    }
}

/// Runs the workload natively and under the shim, `repeat` times each, interleaved.
fn measure(args: &Args, name: &str) -> Runs {
    let mut runs = Runs { native: Vec::new(), shim: Vec::new() };
    for _ in 0..args.repeat {
        runs.native.push(run_child(args, name, false));
        runs.shim.push(run_child(args, name, true));
        eprint!(".");
    }
    runs
}

/// The launch workload written in Python (`python_launch.py`): what a Python program's
/// launches cost, its frames captured too.
const PYTHON_WORKLOAD: &str = "launch_python";

fn python_available() -> bool {
    Command::new("python3").arg("-c").arg("import ctypes").output().is_ok_and(|o| o.status.success())
}

fn run_child(args: &Args, name: &str, with_shim: bool) -> Stats {
    let mut cmd = if name == PYTHON_WORKLOAD {
        let mut cmd = Command::new("python3");
        cmd.arg("-c").arg(include_str!("../python_launch.py"));
        cmd
    } else {
        let mut cmd = Command::new(std::env::current_exe().expect("this executable"));
        cmd.args(["--child", name]);
        cmd
    };
    // The child's report goes to the temporary folder and is removed once read: a bench run
    // leaves nothing in the folder it was started from.
    let report = std::env::temp_dir().join("streamsan-bench.%p.json");
    let options = format!("{} log_path='{}'", workloads::options(name), report.display());
    cmd.env("LD_LIBRARY_PATH", &args.driver)
        .env("STREAMSAN_OPTIONS", options)
        .env_remove("STANDIN_LOG")
        .env_remove("STANDIN_KERNEL_NS")
        .env_remove("LD_PRELOAD");
    if let Some(ns) = workloads::kernel_ns(name) {
        cmd.env("STANDIN_KERNEL_NS", ns.to_string());
    }
    match (&args.sanitizer, workloads::needs_sanitizer(name)) {
        (Some(library), true) => cmd.env("STREAMSAN_SANITIZER_LIB", library),
        _ => cmd.env_remove("STREAMSAN_SANITIZER_LIB"),
    };
    if with_shim {
        cmd.env("LD_PRELOAD", &args.shim);
    }
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run the workload");
    let report = report.to_string_lossy().replace("%p", &child.id().to_string());
    let output = child.wait_with_output().expect("run the workload");
    let _ = std::fs::remove_file(report);
    assert!(
        output.status.success(),
        "{name} ({}) failed: {}{}",
        if with_shim { "with the shim" } else { "natively" },
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8_lossy(&output.stdout);
    let value: Value = serde_json::from_str(line.trim()).expect("the workload's figures");
    Stats {
        p50: value["p50"].as_f64().unwrap_or(0.0),
        p99: value["p99"].as_f64().unwrap_or(0.0),
        mean: value["mean"].as_f64().unwrap_or(0.0),
        buffer_bytes: value["buffer_bytes"].as_f64().unwrap_or(0.0),
        resident_growth: value["resident_growth"].as_f64(),
        sync_p50: value["sync_p50"].as_f64(),
        collective_p50: value["collective_p50"].as_f64(),
    }
}

/// In the child: runs one workload and prints its figures as one JSON line.
fn child(name: &str) {
    let run = WORKLOADS.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no workload {name}")).1;
    let driver = driver::Driver::load();
    let mut measured = run(&driver);
    measured.latencies.sort_unstable();
    measured.waits.sort_unstable();
    measured.collectives.sort_unstable();
    let at = |q: f64| measured.latencies[((measured.latencies.len() - 1) as f64 * q) as usize];
    let mean = measured.latencies.iter().sum::<u64>() as f64 / measured.latencies.len().max(1) as f64;
    let sync_p50 = measured.waits.get(measured.waits.len() / 2);
    let collective_p50 = measured.collectives.get(measured.collectives.len() / 2);
    let figures = json!({ "p50": at(0.50), "p99": at(0.99), "mean": mean, "buffer_bytes": measured.buffer_bytes, "resident_growth": measured.resident_growth, "sync_p50": sync_p50, "collective_p50": collective_p50 });
    println!("{figures}");
}

/// The document written to `streamsan-bench.json`: the headline figures (medians over the
/// pairs of runs), then each workload's, with their spread.
fn summarize(results: &[(&str, Runs)]) -> Value {
    let find = |name: &str| results.iter().find(|(n, _)| *n == name).map(|(_, runs)| runs);
    let added = |name: &str, p: fn(&Stats) -> f64| find(name).map(|runs| runs.added(p).median.round());
    let bytes_per_live_buffer = find("launch_1m_buffers").map(|runs| {
        let growth = |r: &[Stats]| Runs::median_of(r, |s| s.buffer_bytes);
        ((growth(&runs.shim) - growth(&runs.native)) / 1e6).round()
    });
    let details: serde_json::Map<String, Value> = results
        .iter()
        .map(|(name, runs)| {
            let growth: Vec<f64> = runs.shim.iter().filter_map(|s| s.resident_growth).collect();
            let native_growth: Vec<f64> = runs.native.iter().filter_map(|s| s.resident_growth).collect();
            let mut entry = json!({
                "added_p50_ns": runs.added(|s| s.p50).json(),
                "added_p99_ns": runs.added(|s| s.p99).json(),
                "added_mean_ns": runs.added(|s| s.mean).json(),
                "native_p50_ns": Runs::median_of(&runs.native, |s| s.p50),
                "streamsan_p50_ns": Runs::median_of(&runs.shim, |s| s.p50),
                "pairs": runs.shim.len(),
            });
            if !growth.is_empty() {
                entry["resident_growth_bytes"] =
                    json!({ "native": median(&native_growth), "streamsan": median(&growth) });
            }
            let apart: [(&str, TimedApart); 2] = [("sync", |s| s.sync_p50), ("collective", |s| s.collective_p50)];
            for (what, p50) in apart {
                if let Some(added) = runs.added_apart(p50) {
                    entry[format!("added_{what}_p50_ns")] = added.json();
                    let native: Vec<f64> = runs.native.iter().filter_map(p50).collect();
                    entry[format!("native_{what}_p50_ns")] = json!(median(&native));
                }
            }
            (name.to_string(), entry)
        })
        .collect();
    json!({
        "launch_added_ns_p50_1t": added("launch_1t", |s| s.p50),
        "launch_added_ns_mean_1t": added("launch_1t", |s| s.mean),
        "training_step_added_ns_mean": added("training_step", |s| s.mean),
        "training_step_cold_16m_added_ns_mean": added("training_step_cold_16m", |s| s.mean),
        "training_step_prefetch_added_ns_mean": added("training_step_prefetch", |s| s.mean),
        "training_step_synced_added_ns_mean": added("training_step_synced", |s| s.mean),
        "training_step_synced_added_ns_sync_p50": find("training_step_synced").and_then(Runs::added_sync).map(|s| s.median.round()),
        "training_step_synced_ddp_added_ns_all_reduce_p50": find("training_step_synced_ddp").and_then(Runs::added_collective).map(|s| s.median.round()),
        "launch_added_ns_p99_1t": added("launch_1t", |s| s.p99),
        "launch_added_ns_p50_legacy": added("launch_legacy", |s| s.p50),
        "launch_added_ns_p50_pytorch_like": added("launch_pytorch_like", |s| s.p50),
        "launch_added_ns_p50_16t": added("launch_16t", |s| s.p50),
        "alloc_free_added_ns_p50": added("alloc_free", |s| s.p50),
        "event_added_ns_p50": added("event", |s| s.p50),
        "bytes_per_live_buffer": bytes_per_live_buffer,
        "launch_added_ns_p50_1m_buffers": added("launch_1m_buffers", |s| s.p50),
        "launch_added_ns_p50_1m_buffers_cold": added("launch_1m_buffers_cold", |s| s.p50),
        "launch_added_ns_p50_python": added(PYTHON_WORKLOAD, |s| s.p50),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "details": details,
    })
}

fn print_table(document: &Value) {
    let one_thread = document["launch_added_ns_p50_1t"].as_f64().unwrap_or(0.0);
    // Keys without a figure (no python3 here) print as "-".
    // A launch's median is its queueing: the model is told of launches in batches, which one
    // call in many pays for; the means carry that.
    let rows: [(&str, &str, f64); 18] = [
        ("launch_added_ns_p50_1t", "launch, 1 thread, median (ns)", 300.0),
        ("launch_added_ns_mean_1t", "launch, 1 thread, mean (ns)", 300.0),
        ("training_step_added_ns_mean", "training step, mean (ns)", f64::INFINITY),
        ("training_step_cold_16m_added_ns_mean", "  caches evicted, mean (ns)", f64::INFINITY),
        ("training_step_prefetch_added_ns_mean", "  with a prefetcher, mean (ns)", f64::INFINITY),
        ("training_step_synced_added_ns_mean", "  with device time, mean (ns)", f64::INFINITY),
        ("training_step_synced_added_ns_sync_p50", "  its synchronize, median (ns)", f64::INFINITY),
        ("training_step_synced_ddp_added_ns_all_reduce_p50", "  DDP's all-reduce, median (ns)", f64::INFINITY),
        ("launch_added_ns_p99_1t", "launch, 1 thread, p99 (ns)", 2000.0),
        ("launch_added_ns_p50_legacy", "  on the legacy stream, median (ns)", 300.0),
        ("launch_added_ns_p50_pytorch_like", "  PyTorch's elementwise op (ns)", f64::INFINITY),
        ("launch_added_ns_p50_16t", "launch, 16 threads, median (ns)", 2.0 * one_thread),
        ("alloc_free_added_ns_p50", "alloc + free, median (ns)", 300.0),
        ("event_added_ns_p50", "event record + wait, median (ns)", 300.0),
        ("bytes_per_live_buffer", "bytes per live buffer", 256.0),
        ("launch_added_ns_p50_1m_buffers", "launch, 1M buffers, median (ns)", 2.0 * one_thread),
        ("launch_added_ns_p50_1m_buffers_cold", "  every launch cold, median (ns)", f64::INFINITY),
        ("launch_added_ns_p50_python", "launch from Python, median (ns)", f64::INFINITY),
    ];
    println!("{:<34} {:>10} {:>10}", "added by streamsan", "measured", "target");
    for (key, label, target) in rows {
        let value = document[key].as_f64().unwrap_or(f64::NAN);
        let mark = if value.is_nan() || value <= target { "" } else { "  over" };
        let target = if target.is_finite() { format!("≤ {target:.0}") } else { "-".into() };
        println!("{label:<34} {value:>10.0} {target:>10}{mark}");
    }
    println!("({} CPUs)", document["cpus"]);
}
