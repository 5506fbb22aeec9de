//! The stand-in's call log and fault injection, both set up from the environment.
//!
//! - `STANDIN_LOG=path`: every call of a table entry point is appended to `path` as
//!   `name(arg=value, ...) -> status`, in the format of `streamsan_driver_api::render_call`.
//! - `STANDIN_FAIL=name:n:code,...`: the `n`-th call (from 1) of `name` returns `code`
//!   without doing anything. `*` as the name means every entry point's `n`-th call, and
//!   `name:*:code` every call of `name`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use streamsan_driver_api::{render_call, CUresult};

struct Fault {
    name: String,
    nth: Option<u64>,
    code: CUresult,
}

struct Config {
    log: Option<Mutex<File>>,
    faults: Vec<Fault>,
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let log = std::env::var_os("STANDIN_LOG").map(|path| {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("stand-in: cannot open STANDIN_LOG {path:?}: {e}"));
            Mutex::new(file)
        });
        let faults = std::env::var("STANDIN_FAIL").map(|spec| parse_faults(&spec)).unwrap_or_default();
        Config { log, faults }
    })
}

fn parse_faults(spec: &str) -> Vec<Fault> {
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let parts: Vec<&str> = item.split(':').collect();
            let [name, nth, code] = parts[..] else {
                panic!("stand-in: STANDIN_FAIL item {item:?} is not name:n:code");
            };
            Fault {
                name: name.to_string(),
                nth: if nth == "*" { None } else { Some(nth.parse().expect("STANDIN_FAIL n")) },
                code: code.parse().expect("STANDIN_FAIL code"),
            }
        })
        .collect()
}

/// The injected status for this call of `name`, if any.
fn injected(name: &str) -> Option<CUresult> {
    let faults = &config().faults;
    if faults.is_empty() {
        return None;
    }
    static CALLS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let mut calls = CALLS.lock().unwrap();
    let n = calls.get_or_insert_with(HashMap::new).entry(name.to_string()).or_insert(0);
    *n += 1;
    let n = *n;
    faults.iter().find(|f| (f.name == "*" || f.name == name) && f.nth.is_none_or(|k| k == n)).map(|f| f.code)
}

/// Runs one entry point: an injected fault, or `behaviour`; logs it either way.
pub fn call(
    name: &str,
    args: impl FnOnce() -> Vec<(&'static str, String)>,
    behaviour: impl FnOnce() -> CUresult,
) -> CUresult {
    let config = config();
    // Render the arguments before the call: out-parameters are logged as the caller passed them.
    let line = config.log.as_ref().map(|_| render_call(name, &args()));
    let status = injected(name).unwrap_or_else(behaviour);
    if let (Some(log), Some(line)) = (&config.log, line) {
        let mut file = log.lock().unwrap();
        let _ = writeln!(file, "{line} -> {status}");
    }
    status
}
