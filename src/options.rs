//! streamsan's options, declared once in the `options!` table: from one line per option come
//! the [`Options`] struct, its defaults, the `STREAMSAN_OPTIONS` parser and writer
//! (ThreadSanitizer's `key=value:key=value` syntax), and `streamsan run`'s flags and help.
//! Paths are bytes, as Linux names files: a path option takes any bytes, the others UTF-8.

use std::ffi::{OsStr, OsString};
use std::fmt::{self, Write as _};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// How an option's value is written, on the command line and in `STREAMSAN_OPTIONS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// A non-empty path, any bytes; the name of the value in the help (`PATH`, `FILE`).
    Path(&'static str),
    /// `0` or `1` (`false`, `true`); on the command line, a flag without a value that turns
    /// the option away from its default ([`Flag::switched`]).
    Switch,
    /// A whole number in `min..=max` (`N` in the help).
    Number { min: u64, max: u64 },
    /// One of these names (an enum declared with `named_enum!`: its `ALL_NAMES`).
    Choice(&'static [&'static str]),
}

macro_rules! options {
    ($( $name:ident: $ty:ty = $default:expr, $syntax:expr, $flag:literal, $help:literal; )+) => {
        /// Parsed options: one field per line of the table.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Options {
            $( #[doc = $help] pub $name: $ty, )+
        }

        impl Default for Options {
            fn default() -> Options {
                Options { $( $name: $default, )+ }
            }
        }

        impl Options {
            /// Every option's name, in the table's order.
            pub const NAMES: &'static [&'static str] = &[$( stringify!($name) ),+];

            /// Sets one option from its value: bytes for a path, UTF-8 text for the others.
            pub fn set(&mut self, key: &str, value: impl AsRef<OsStr>) -> Result<(), OptionError> {
                match key {
                    $( stringify!($name) => self.$name = OptionValue::parse(key, value.as_ref(), $syntax)?, )+
                    _ => {
                        return Err(OptionError(format!("unknown option {key:?} (known: {})", Options::NAMES.join(", "))))
                    }
                }
                Ok(())
            }

            /// The `STREAMSAN_OPTIONS` value for these options (defaults left out): bytes, as
            /// a path may be.
            pub fn to_env(&self) -> OsString {
                let default = Options::default();
                let mut items: Vec<Vec<u8>> = Vec::new();
                $(
                    if self.$name != default.$name {
                        let mut item = concat!(stringify!($name), "=").as_bytes().to_vec();
                        item.extend(quote(self.$name.write().as_bytes()));
                        items.push(item);
                    }
                )+
                OsString::from_vec(items.join(&b':'))
            }

            /// The `streamsan run` flags, in the table's order, with their help.
            pub fn flags() -> Vec<Flag> {
                let default = Options::default();
                vec![$(
                    Flag {
                        name: $flag,
                        key: stringify!($name),
                        syntax: $syntax,
                        switched: if default.$name.write() == "1" { "0" } else { "1" },
                        help: match default.$name.shown() {
                            Some(value) => format!("{} (default {value})", $help),
                            None => $help.to_string(),
                        },
                    },
                )+]
            }
        }
    };
}

options! {
    log_path: PathBuf = PathBuf::from(DEFAULT_REPORT), Syntax::Path("PATH"), "--report",
        "where reports go (%p: the process id); never written over an existing file or through a link";
    halt_on_error: bool = false, Syntax::Switch, "--halt-on-error",
        "stop the program at its first race";
    exitcode: i32 = 66, Syntax::Number { min: 0, max: 255 }, "--exitcode",
        "the exit status of a run with races, 0 to leave the program's";
    suppressions: Option<PathBuf> = None, Syntax::Path("FILE"), "--suppressions",
        "races not to report (ThreadSanitizer's format)";
    print_limit: Option<u64> = None, Syntax::Number { min: 0, max: u64::MAX }, "--print-limit",
        "print at most N races on stderr (all go to the report)";
    backtrace_depth: usize = 24, Syntax::Number { min: 1, max: MAX_BACKTRACE_DEPTH as u64 }, "--backtrace-depth",
        "native frames captured at each call (at most 64), and frames a report shows per call site";
    quiet: bool = false, Syntax::Switch, "--quiet",
        "print nothing on stderr but errors";
    host_races: bool = false, Syntax::Switch, "--host-races",
        "guard pinned and managed memory that copies, memsets and kernels in flight use, to catch the host touching it (host races)";
    host_race_pages: usize = 16, Syntax::Number { min: 0, max: u64::MAX }, "--host-race-pages",
        "with --host-races, guard the first N pages of an operation's range and its last (0: every page)";
    phase_times: bool = false, Syntax::Switch, "--phase-times",
        "print at exit the time spent in each phase of the intercepted calls, and what a launch carried (parameter words, accesses, shadow records met)";
    footprint: Footprint = Footprint::Learn, Syntax::Choice(Footprint::ALL_NAMES), "--footprint",
        "what a kernel touches: exact measures every launch, learn a kernel's first launches and applies them to later ones, params takes its parameters' pointers";
    pageable_copies: PageableCopies = PageableCopies::Wait, Syntax::Choice(PageableCopies::ALL_NAMES), "--pageable-copies",
        "whether the host waits for an *Async copy from the device to pageable memory: wait (CUDA's earlier wording) or async (the current one's \"might be synchronous\" not relied on)";
}

named_enum! {
    /// How the shim learns what a kernel launch touches (the footprint engine,
    /// `shim/footprint`, measures; without it every mode is `params`, with a note).
    pub enum Footprint("footprint") {
        /// Every launch measured: exact, checked when the program synchronizes with it.
        Exact = "exact",
        /// A kernel's first launches measured; what they showed (each parameter's direction
        /// and extent) applies to its later launches, unmeasured.
        Learn = "learn",
        /// The parameters' pointers only, each the byte it names.
        Params = "params",
    }
}

named_enum! {
    /// How an `*Async` copy from the device to pageable host memory orders the host
    /// (`docs/semantics.md#deviations`).
    pub enum PageableCopies("pageable copies") {
        /// The host waits for the copy: it returns once the copy completed.
        Wait = "wait",
        /// The host does not wait: the copy may still run when the call returns.
        Async = "async",
    }
}

/// Where reports go unless `log_path` (`--report`) says otherwise: in the program's working
/// directory, one per process.
pub const DEFAULT_REPORT: &str = "streamsan.%p.json";

/// The deepest `backtrace_depth` (`--backtrace-depth`): the shim captures that many native
/// frames at every call into stack buffers of this size, on the calling thread.
pub const MAX_BACKTRACE_DEPTH: usize = 64;

/// One `streamsan run` flag: the option it sets, and its help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// `--report`.
    pub name: &'static str,
    /// The option's `STREAMSAN_OPTIONS` name.
    pub key: &'static str,
    pub syntax: Syntax,
    /// What a switch sets its option to: the other value than its default.
    pub switched: &'static str,
    /// What it does, with its default where it has one.
    pub help: String,
}

impl Flag {
    /// Whether the flag is followed by a value (a switch is not: it sets `key=1`).
    pub fn takes_value(&self) -> bool {
        self.syntax != Syntax::Switch
    }

    /// The flag as the help writes it: `--report PATH`, `--quiet`.
    pub fn usage(&self) -> String {
        match self.syntax {
            Syntax::Path(value) => format!("{} {value}", self.name),
            Syntax::Switch => self.name.to_string(),
            Syntax::Number { .. } => format!("{} N", self.name),
            Syntax::Choice(names) => format!("{} {}", self.name, names.join("|")),
        }
    }

    /// The option as `STREAMSAN_OPTIONS` writes it: `log_path=PATH`, `quiet=1`.
    pub fn env_usage(&self) -> String {
        match self.syntax {
            Syntax::Path(value) => format!("{}={value}", self.key),
            Syntax::Switch => format!("{}={}", self.key, self.switched),
            Syntax::Number { .. } => format!("{}=N", self.key),
            Syntax::Choice(names) => format!("{}={}", self.key, names.join("|")),
        }
    }
}

/// A type an option can have: read from its value, written back.
pub trait OptionValue: Sized + PartialEq {
    fn parse(key: &str, value: &OsStr, syntax: Syntax) -> Result<Self, OptionError>;
    /// The value [`OptionValue::parse`] reads back.
    fn write(&self) -> OsString;
    /// The value as the help names a default; None for an unset or switched-off option.
    fn shown(&self) -> Option<String>;
}

impl OptionValue for PathBuf {
    fn parse(key: &str, value: &OsStr, _: Syntax) -> Result<Self, OptionError> {
        if value.is_empty() {
            return Err(OptionError(format!("option {key} needs a value")));
        }
        Ok(PathBuf::from(value))
    }
    fn write(&self) -> OsString {
        self.clone().into_os_string()
    }
    fn shown(&self) -> Option<String> {
        Some(shown_path(self))
    }
}

impl OptionValue for Option<PathBuf> {
    fn parse(key: &str, value: &OsStr, syntax: Syntax) -> Result<Self, OptionError> {
        PathBuf::parse(key, value, syntax).map(Some)
    }
    fn write(&self) -> OsString {
        self.clone().map(PathBuf::into_os_string).unwrap_or_default()
    }
    fn shown(&self) -> Option<String> {
        self.as_deref().map(shown_path)
    }
}

impl OptionValue for bool {
    fn parse(key: &str, value: &OsStr, _: Syntax) -> Result<Self, OptionError> {
        boolean(key, text(key, value)?)
    }
    fn write(&self) -> OsString {
        if *self { "1" } else { "0" }.into()
    }
    fn shown(&self) -> Option<String> {
        None
    }
}

/// Whole numbers, bounded by the option's [`Syntax::Number`].
macro_rules! whole_number {
    ($($ty:ty),+) => {$(
        impl OptionValue for $ty {
            fn parse(key: &str, value: &OsStr, syntax: Syntax) -> Result<Self, OptionError> {
                let (min, max) = bounds(syntax, <$ty>::MAX as u64);
                Ok(number(key, text(key, value)?, min, max)? as $ty)
            }
            fn write(&self) -> OsString {
                self.to_string().into()
            }
            fn shown(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )+};
}

whole_number!(i32, usize, u64);

impl OptionValue for Option<u64> {
    fn parse(key: &str, value: &OsStr, syntax: Syntax) -> Result<Self, OptionError> {
        u64::parse(key, value, syntax).map(Some)
    }
    fn write(&self) -> OsString {
        self.map(|n| n.to_string()).unwrap_or_default().into()
    }
    fn shown(&self) -> Option<String> {
        self.map(|n| n.to_string())
    }
}

/// The options that are one of a `named_enum!`'s names.
macro_rules! choice_options {
    ($($enum:ty),*) => {$(
        impl OptionValue for $enum {
            fn parse(key: &str, value: &OsStr, _: Syntax) -> Result<Self, OptionError> {
                text(key, value)?.parse().map_err(|why| OptionError(format!("option {key}: {why}")))
            }
            fn write(&self) -> OsString {
                self.as_str().into()
            }
            fn shown(&self) -> Option<String> {
                Some(self.as_str().to_string())
            }
        }
    )*};
}

choice_options!(Footprint, PageableCopies);

/// The bounds of a number: the option's, within the type's (numbers are never negative).
fn bounds(syntax: Syntax, type_max: u64) -> (u64, u64) {
    match syntax {
        Syntax::Number { min, max } => (min, max.min(type_max)),
        Syntax::Path(_) | Syntax::Switch | Syntax::Choice(_) => (0, type_max),
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
    /// The options of `STREAMSAN_OPTIONS` (the defaults when it is not set), read as bytes:
    /// a path in it need not be UTF-8.
    pub fn from_env() -> Result<Options, OptionError> {
        match std::env::var_os("STREAMSAN_OPTIONS") {
            Some(text) => Options::parse(text),
            None => Ok(Options::default()),
        }
    }

    /// Parses `key=value:key=value`. Unknown keys, malformed items and a value that is not
    /// UTF-8 for an option other than a path are errors.
    pub fn parse(text: impl AsRef<OsStr>) -> Result<Options, OptionError> {
        let mut options = Options::default();
        for item in split(text.as_ref().as_bytes())? {
            let Some(at) = item.iter().position(|&b| b == b'=') else {
                return Err(OptionError(format!(
                    "option \"{}\" is not key=value",
                    shown_path(OsStr::from_bytes(&item))
                )));
            };
            let key = String::from_utf8_lossy(&item[..at]);
            options.set(&key, OsStr::from_bytes(&item[at + 1..]))?;
        }
        Ok(options)
    }
}

/// Splits at `:` and white space outside quotes, dropping the quotes. The separators and
/// quotes are ASCII: no byte of a UTF-8 character is taken for one.
fn split(text: &[u8]) -> Result<Vec<Vec<u8>>, OptionError> {
    let mut items = Vec::new();
    let mut item = Vec::new();
    let mut quote: Option<u8> = None;
    for &b in text {
        match (quote, b) {
            (Some(q), b) if b == q => quote = None,
            (Some(_), b) => item.push(b),
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b':' | b' ' | b'\n' | b'\t') => {
                if !item.is_empty() {
                    items.push(std::mem::take(&mut item));
                }
            }
            (None, b) => item.push(b),
        }
    }
    if let Some(q) = quote {
        return Err(OptionError(format!(
            "unterminated {} quote in \"{}\"",
            q as char,
            shown_path(OsStr::from_bytes(text))
        )));
    }
    if !item.is_empty() {
        items.push(item);
    }
    Ok(items)
}

fn quote(value: &[u8]) -> Vec<u8> {
    if value.iter().any(|b| b": '\"\n\t".contains(b)) {
        let q = if value.contains(&b'\'') { b'"' } else { b'\'' };
        [&[q], value, &[q]].concat()
    } else {
        value.to_vec()
    }
}

/// The value of an option other than a path, which must be UTF-8.
fn text<'a>(key: &str, value: &'a OsStr) -> Result<&'a str, OptionError> {
    value.to_str().ok_or_else(|| OptionError(format!("option {key} takes UTF-8 text, not \"{}\"", shown_path(value))))
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
        _ if max == u64::MAX => {
            Err(OptionError(format!("option {key} takes a whole number from {min} up, not {value:?}")))
        }
        _ => Err(OptionError(format!("option {key} takes a whole number from {min} to {max}, not {value:?}"))),
    }
}

/// The bytes before the first `%p` of `pattern` and those after it.
pub fn split_at_pid(pattern: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = pattern.windows(2).position(|w| w == b"%p")?;
    Some((&pattern[..at], &pattern[at + 2..]))
}

/// Whether the report path `pattern` has a `%p`, for the process id.
pub fn has_pid(pattern: &Path) -> bool {
    split_at_pid(pattern.as_os_str().as_bytes()).is_some()
}

/// `pattern` with every `%p` replaced by `pid`; the other bytes as they are.
pub fn expand_path(pattern: &Path, pid: u32) -> PathBuf {
    let mut rest = pattern.as_os_str().as_bytes();
    let mut path = Vec::with_capacity(rest.len());
    while let Some((before, after)) = split_at_pid(rest) {
        path.extend_from_slice(before);
        path.extend_from_slice(pid.to_string().as_bytes());
        rest = after;
    }
    path.extend_from_slice(rest);
    PathBuf::from(OsString::from_vec(path))
}

/// A path as messages show it: its UTF-8 as it is, each other byte as `\xNN`.
pub fn shown_path(path: impl AsRef<OsStr>) -> String {
    let mut shown = String::new();
    for chunk in path.as_ref().as_bytes().utf8_chunks() {
        shown.push_str(chunk.valid());
        for byte in chunk.invalid() {
            let _ = write!(shown, "\\x{byte:02X}");
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tsan_syntax() {
        let o = Options::parse("log_path=/tmp/r.%p.json:halt_on_error=1 exitcode=3:print_limit=5:backtrace_depth=8:quiet=true:footprint=exact:host_races=0").unwrap();
        assert_eq!(o.footprint, Footprint::Exact);
        assert_eq!(o.log_path, Path::new("/tmp/r.%p.json"));
        assert!(o.halt_on_error && o.quiet && !o.host_races);
        assert_eq!((o.exitcode, o.print_limit, o.backtrace_depth), (3, Some(5), 8));
        assert_eq!(Options::parse("").unwrap(), Options::default());
        assert_eq!(Options::parse(o.to_env()).unwrap(), o);
    }

    #[test]
    fn quoted_values_keep_colons_and_spaces() {
        let o = Options::parse("suppressions='/tmp/a b:c.supp':log_path=\"x'y\"").unwrap();
        assert_eq!(o.suppressions.as_deref(), Some(Path::new("/tmp/a b:c.supp")));
        assert_eq!(o.log_path, Path::new("x'y"));
        assert_eq!(Options::parse(o.to_env()).unwrap(), o);
    }

    #[test]
    fn rejects_unknown_and_malformed_options() {
        assert!(Options::parse("colour=1").unwrap_err().0.contains("colour"));
        assert!(Options::parse("log_path").unwrap_err().0.contains("key=value"));
        assert!(Options::parse("exitcode=256").unwrap_err().0.contains("0 to 255"));
        assert!(Options::parse("halt_on_error=yes").unwrap_err().0.contains("0 or 1"));
        assert!(Options::parse("backtrace_depth=0").unwrap_err().0.contains("backtrace_depth"));
        assert!(Options::parse(format!("backtrace_depth={MAX_BACKTRACE_DEPTH}")).is_ok());
        let over = format!("backtrace_depth={}", MAX_BACKTRACE_DEPTH + 1);
        assert!(Options::parse(&over).unwrap_err().0.contains("backtrace_depth"));
        // The help says the bound in words: it must be the bound.
        let help = Options::flags().into_iter().find(|f| f.key == "backtrace_depth").unwrap().help;
        assert!(help.contains(&format!("at most {MAX_BACKTRACE_DEPTH})")), "{help}");
        assert!(Options::parse("log_path=").unwrap_err().0.contains("needs a value"));
        assert!(Options::parse("log_path='x").unwrap_err().0.contains("unterminated"));
        assert!(Options::parse("footprint=fast").unwrap_err().0.contains("exact, learn, params"));
    }

    #[test]
    fn the_readme_lists_every_flag_as_the_help_does() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        for flag in Options::flags() {
            // A `|` in a cell (`exact|learn|params`) is written `\|`, as Markdown tables need.
            let cell = |text: String| text.replace('|', "\\|");
            let row = format!("| `{}` | `{}` | {} |", cell(flag.usage()), cell(flag.env_usage()), flag.help);
            assert!(readme.contains(&row), "README.md lacks the row {row}");
        }
    }

    #[test]
    fn every_option_has_a_flag_that_sets_it() {
        let flags = Options::flags();
        assert_eq!(flags.iter().map(|f| f.key).collect::<Vec<_>>(), Options::NAMES);
        let mut options = Options::default();
        for flag in &flags {
            let value = match flag.syntax {
                Syntax::Path(_) => "x",
                Syntax::Switch => flag.switched,
                Syntax::Number { min, .. } => {
                    if min == 0 {
                        "7"
                    } else {
                        "9"
                    }
                }
                Syntax::Choice(names) => names[0],
            };
            options.set(flag.key, value).unwrap();
        }
        assert_eq!(options.to_env(), "log_path=x:halt_on_error=1:exitcode=7:suppressions=x:print_limit=7:backtrace_depth=9:quiet=1:host_races=1:host_race_pages=7:phase_times=1:footprint=exact");
    }

    #[test]
    fn paths_take_any_bytes_and_the_other_values_utf8() {
        let o = Options::parse(OsStr::from_bytes(b"log_path='/tmp/r\xe9 %p.json':suppressions=s\xff.supp")).unwrap();
        assert_eq!(o.log_path.as_os_str().as_bytes(), b"/tmp/r\xe9 %p.json");
        assert_eq!(o.suppressions.as_deref().map(|p| p.as_os_str().as_bytes()), Some(&b"s\xff.supp"[..]));
        assert_eq!(Options::parse(o.to_env()).unwrap(), o);
        let why = Options::parse(OsStr::from_bytes(b"exitcode=\xe9")).unwrap_err().0;
        assert_eq!(why, "option exitcode takes UTF-8 text, not \"\\xE9\"");
        assert!(Options::parse(OsStr::from_bytes(b"footprint=exact\xe9")).is_err());
    }

    #[test]
    fn expands_pid_and_shows_other_bytes_escaped() {
        assert_eq!(expand_path(Path::new("r.%p.json"), 42), Path::new("r.42.json"));
        let pattern = Path::new(OsStr::from_bytes(b"/tmp/%p/r\xe9.%p"));
        assert_eq!(expand_path(pattern, 7).as_os_str().as_bytes(), b"/tmp/7/r\xe9.7");
        assert!(has_pid(pattern) && !has_pid(Path::new("r.json")));
        assert_eq!(shown_path(pattern), "/tmp/%p/r\\xE9.%p");
        assert_eq!(shown_path("caf\u{e9}"), "caf\u{e9}");
    }
}
