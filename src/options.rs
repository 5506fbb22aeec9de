//! streamsan's options, in ThreadSanitizer's syntax: `key=value` pairs separated by `:` (or
//! spaces), read from `STREAMSAN_OPTIONS` by the shim and written there by `streamsan run`.
//! A value holding `:` or a space is quoted, `'...'` or `"..."`.
//!
//! | key | meaning | default |
//! | --- | --- | --- |
//! | `log_path` | where the JSON report goes; `%p` is the process id | none |
//! | `halt_on_error` | stop the program at the first race (exit status `exitcode`) | 0 |
//! | `exitcode` | the exit status of a program that found races and would have exited 0 | 66 |
//! | `suppressions` | a file of races not to report ([`crate::suppressions`]) | none |
//! | `print_limit` | races printed on stderr at most (all go to the report) | unlimited |
//! | `backtrace_depth` | frames per call site in reports | 24 |
//! | `quiet` | print nothing on stderr but errors | 0 |
//! | `host_races` | catch the host touching the pinned memory of an asynchronous copy in flight (page protection; README, "Host races") | 1 |

use std::fmt;

/// Frames per call site in reports unless told otherwise: all the shim records.
pub const DEFAULT_BACKTRACE_DEPTH: usize = 24;
/// The exit status of a program with races, unless told otherwise (ThreadSanitizer's).
pub const DEFAULT_EXITCODE: i32 = 66;

/// Parsed options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where the JSON report goes; `%p` becomes the process id. None: no report file.
    pub log_path: Option<String>,
    pub halt_on_error: bool,
    pub exitcode: i32,
    pub suppressions: Option<String>,
    /// None: print every race.
    pub print_limit: Option<u64>,
    pub backtrace_depth: usize,
    pub quiet: bool,
    /// Guard the pinned host pages of asynchronous copies in flight (issue 12).
    pub host_races: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            log_path: None,
            halt_on_error: false,
            exitcode: DEFAULT_EXITCODE,
            suppressions: None,
            print_limit: None,
            backtrace_depth: DEFAULT_BACKTRACE_DEPTH,
            quiet: false,
            host_races: true,
        }
    }
}

/// An option that could not be understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError(pub String);

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}

impl Options {
    /// Parses `key=value:key=value`. Unknown keys and malformed items are errors.
    pub fn parse(text: &str) -> Result<Options, OptionError> {
        let mut options = Options::default();
        for item in split(text)? {
            let Some((key, value)) = item.split_once('=') else {
                return Err(OptionError(format!("option {item:?} is not key=value")));
            };
            options.set(key, value)?;
        }
        Ok(options)
    }

    /// Sets one option from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), OptionError> {
        match key {
            "log_path" => self.log_path = Some(non_empty(key, value)?.to_string()),
            "halt_on_error" => self.halt_on_error = boolean(key, value)?,
            "exitcode" => self.exitcode = number(key, value, 0, 255)? as i32,
            "suppressions" => self.suppressions = Some(non_empty(key, value)?.to_string()),
            "print_limit" => self.print_limit = Some(number(key, value, 0, u64::MAX)?),
            "backtrace_depth" => self.backtrace_depth = number(key, value, 1, 1024)? as usize,
            "quiet" => self.quiet = boolean(key, value)?,
            "host_races" => self.host_races = boolean(key, value)?,
            _ => {
                return Err(OptionError(format!(
                    "unknown option {key:?} (known: log_path, halt_on_error, exitcode, suppressions, print_limit, backtrace_depth, quiet, host_races)"
                )))
            }
        }
        Ok(())
    }

    /// The `STREAMSAN_OPTIONS` text for these options (defaults left out).
    pub fn to_env(&self) -> String {
        let default = Options::default();
        let mut items = Vec::new();
        if let Some(path) = &self.log_path {
            items.push(format!("log_path={}", quote(path)));
        }
        if self.halt_on_error {
            items.push("halt_on_error=1".to_string());
        }
        if self.exitcode != default.exitcode {
            items.push(format!("exitcode={}", self.exitcode));
        }
        if let Some(file) = &self.suppressions {
            items.push(format!("suppressions={}", quote(file)));
        }
        if let Some(limit) = self.print_limit {
            items.push(format!("print_limit={limit}"));
        }
        if self.backtrace_depth != default.backtrace_depth {
            items.push(format!("backtrace_depth={}", self.backtrace_depth));
        }
        if self.quiet {
            items.push("quiet=1".to_string());
        }
        if self.host_races != default.host_races {
            items.push(format!("host_races={}", u8::from(self.host_races)));
        }
        items.join(":")
    }
}

/// Splits at `:` and white space outside quotes, dropping the quotes.
fn split(text: &str) -> Result<Vec<String>, OptionError> {
    let mut items = Vec::new();
    let mut item = String::new();
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => item.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, ':' | ' ' | '\n' | '\t') => {
                if !item.is_empty() {
                    items.push(std::mem::take(&mut item));
                }
            }
            (None, c) => item.push(c),
        }
    }
    if let Some(q) = quote {
        return Err(OptionError(format!("unterminated {q} quote in {text:?}")));
    }
    if !item.is_empty() {
        items.push(item);
    }
    Ok(items)
}

fn quote(value: &str) -> String {
    if value.contains([':', ' ', '\'', '"', '\n', '\t']) {
        let q = if value.contains('\'') { '"' } else { '\'' };
        format!("{q}{value}{q}")
    } else {
        value.to_string()
    }
}

fn non_empty<'a>(key: &str, value: &'a str) -> Result<&'a str, OptionError> {
    if value.is_empty() {
        Err(OptionError(format!("option {key} needs a value")))
    } else {
        Ok(value)
    }
}

fn boolean(key: &str, value: &str) -> Result<bool, OptionError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(OptionError(format!("option {key} takes 0 or 1, not {value:?}"))),
    }
}

fn number(key: &str, value: &str, min: u64, max: u64) -> Result<u64, OptionError> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ if max == u64::MAX => Err(OptionError(format!("option {key} takes a whole number from {min} up, not {value:?}"))),
        _ => Err(OptionError(format!("option {key} takes a whole number from {min} to {max}, not {value:?}"))),
    }
}

/// `path` with every `%p` replaced by `pid`.
pub fn expand_path(path: &str, pid: u32) -> String {
    path.replace("%p", &pid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tsan_syntax() {
        let o = Options::parse("log_path=/tmp/r.%p.json:halt_on_error=1 exitcode=3:print_limit=5:backtrace_depth=8:quiet=true:host_races=0").unwrap();
        assert_eq!(o.log_path.as_deref(), Some("/tmp/r.%p.json"));
        assert!(o.halt_on_error && o.quiet && !o.host_races);
        assert_eq!((o.exitcode, o.print_limit, o.backtrace_depth), (3, Some(5), 8));
        assert_eq!(Options::parse("").unwrap(), Options::default());
        assert_eq!(Options::parse(&o.to_env()).unwrap(), o);
    }

    #[test]
    fn quoted_values_keep_colons_and_spaces() {
        let o = Options::parse("suppressions='/tmp/a b:c.supp':log_path=\"x'y\"").unwrap();
        assert_eq!(o.suppressions.as_deref(), Some("/tmp/a b:c.supp"));
        assert_eq!(o.log_path.as_deref(), Some("x'y"));
        assert_eq!(Options::parse(&o.to_env()).unwrap(), o);
    }

    #[test]
    fn rejects_unknown_and_malformed_options() {
        assert!(Options::parse("colour=1").unwrap_err().0.contains("colour"));
        assert!(Options::parse("log_path").unwrap_err().0.contains("key=value"));
        assert!(Options::parse("exitcode=256").unwrap_err().0.contains("0 to 255"));
        assert!(Options::parse("halt_on_error=yes").unwrap_err().0.contains("0 or 1"));
        assert!(Options::parse("backtrace_depth=0").unwrap_err().0.contains("backtrace_depth"));
        assert!(Options::parse("log_path=").unwrap_err().0.contains("needs a value"));
        assert!(Options::parse("log_path='x").unwrap_err().0.contains("unterminated"));
    }

    #[test]
    fn expands_pid() {
        assert_eq!(expand_path("r.%p.json", 42), "r.42.json");
    }
}
