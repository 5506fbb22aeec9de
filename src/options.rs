//! streamsan's options, in ThreadSanitizer's syntax: `key=value` pairs separated by `:`
//! (or spaces), read from `STREAMSAN_OPTIONS` by the shim and written there by
//! `streamsan run`.

use std::fmt;

/// Parsed options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Where the JSON report goes; `%p` becomes the process id. None: no report file.
    pub log_path: Option<String>,
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
        for item in text.split([':', ' ', '\n']).filter(|s| !s.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(OptionError(format!("option {item:?} is not key=value")));
            };
            match key {
                "log_path" => options.log_path = Some(value.to_string()),
                _ => return Err(OptionError(format!("unknown option {key:?}"))),
            }
        }
        Ok(options)
    }

    /// The `STREAMSAN_OPTIONS` text for these options.
    pub fn to_env(&self) -> String {
        let mut items = Vec::new();
        if let Some(path) = &self.log_path {
            items.push(format!("log_path={path}"));
        }
        items.join(":")
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
        let o = Options::parse("log_path=/tmp/r.%p.json").unwrap();
        assert_eq!(o.log_path.as_deref(), Some("/tmp/r.%p.json"));
        assert_eq!(Options::parse("").unwrap(), Options::default());
        assert_eq!(Options::parse(&o.to_env()).unwrap(), o);
    }

    #[test]
    fn rejects_unknown_and_malformed_options() {
        assert!(Options::parse("colour=1").unwrap_err().0.contains("colour"));
        assert!(Options::parse("log_path").unwrap_err().0.contains("key=value"));
    }

    #[test]
    fn expands_pid() {
        assert_eq!(expand_path("r.%p.json", 42), "r.42.json");
    }
}
