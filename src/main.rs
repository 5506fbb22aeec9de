//! The `streamsan` command.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitCode;
use std::time::SystemTime;

use streamsan::launch;
use streamsan::options::Options;

const USAGE: &str = "usage: streamsan run [--report PATH] -- PROGRAM [ARGS...]

Runs PROGRAM with the streamsan shim preloaded and writes a JSON race report.
  --report PATH   where the report goes (%p: the process id); default streamsan.%p.json";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("run") => run(&args[1..]),
        Some("--help" | "-h" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some("--version" | "-V") => {
            println!("streamsan {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => usage_error("expected a command"),
    }
}

fn usage_error(why: &str) -> ExitCode {
    eprintln!("streamsan: {why}\n{USAGE}");
    ExitCode::from(2)
}

fn run(args: &[OsString]) -> ExitCode {
    let mut options = Options { log_path: Some("streamsan.%p.json".to_string()) };
    let mut i = 0;
    while i < args.len() {
        match args[i].to_str() {
            Some("--") => {
                i += 1;
                break;
            }
            Some("--report") => {
                let Some(path) = args.get(i + 1).and_then(|p| p.to_str()) else {
                    return usage_error("--report needs a path");
                };
                options.log_path = Some(path.to_string());
                i += 2;
            }
            Some(flag) if flag.starts_with('-') => return usage_error(&format!("unknown option {flag}")),
            _ => break,
        }
    }
    let Some((program, program_args)) = args[i..].split_first() else {
        return usage_error("no program to run");
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("streamsan: cannot find my own executable: {e}");
            return ExitCode::from(2);
        }
    };
    let shim = match launch::find_shim(&exe) {
        Ok(shim) => shim,
        Err(why) => {
            eprintln!("streamsan: {why}");
            return ExitCode::from(2);
        }
    };
    let started = SystemTime::now();
    let status = match launch::command(&shim, &options, program, program_args).status() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("streamsan: cannot run {}: {e}", program.to_string_lossy());
            return ExitCode::from(127);
        }
    };
    if let Some(pattern) = &options.log_path {
        if launch::reports_since(pattern, started).is_empty() {
            match status.signal() {
                // Reports are written at exit: a process killed before it leaves none.
                Some(signal) => eprintln!("streamsan: no report: the program was killed by signal {signal} before it could write one"),
                None => eprintln!("streamsan: no report: {}", why_no_report()),
            }
        }
    }
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
