//! Suppressions, in ThreadSanitizer's format: one `type:pattern` per line (`race`, `race_top`
//! or a race kind), `#` starting a comment, matched against the frames and kernels of a race.

use std::fmt;
use std::path::Path;

use super::frames::program_frame;
use super::{Frame, RaceKind, RaceReport};

/// What a rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// Every frame of both operations, and their kernels.
    AnyFrame,
    /// The program frame of each operation, and their kernels.
    Top,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// None: every kind.
    kind: Option<RaceKind>,
    scope: Scope,
    pattern: String,
}

/// The rules of a suppressions file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Suppressions {
    rules: Vec<Rule>,
}

/// A line that is not a suppression, or a file that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuppressionError(pub String);

impl fmt::Display for SuppressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SuppressionError {}

impl Suppressions {
    /// Reads and parses a suppressions file.
    pub fn load(path: &Path) -> Result<Suppressions, SuppressionError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SuppressionError(format!("cannot read the suppressions file {}: {e}", path.display())))?;
        Suppressions::parse(&text).map_err(|e| SuppressionError(format!("{}:{e}", path.display())))
    }

    /// Parses the text of a suppressions file; an error names the line.
    pub fn parse(text: &str) -> Result<Suppressions, SuppressionError> {
        let mut rules = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| SuppressionError(format!("{}: {why}: {line:?}", i + 1));
            let Some((kind, pattern)) = line.split_once(':') else {
                return Err(bad("expected type:pattern"));
            };
            let pattern = pattern.trim();
            if pattern.is_empty() {
                return Err(bad("empty pattern"));
            }
            let (kind, scope) = match kind.trim() {
                "race" => (None, Scope::AnyFrame),
                "race_top" => (None, Scope::Top),
                other => match other.parse::<RaceKind>() {
                    Ok(kind) => (Some(kind), Scope::AnyFrame),
                    Err(_) => {
                        return Err(bad(&format!(
                            "unknown type {other:?} (known: race, race_top, {})",
                            RaceKind::names()
                        )))
                    }
                },
            };
            rules.push(Rule { kind, scope, pattern: pattern.to_string() });
        }
        Ok(Suppressions { rules })
    }

    /// Whether a rule suppresses `race`.
    pub fn suppresses(&self, race: &RaceReport) -> bool {
        self.rules.iter().any(|rule| rule.kind.is_none_or(|k| k == race.kind) && rule.matches(race))
    }
}

impl Rule {
    fn matches(&self, race: &RaceReport) -> bool {
        [&race.first, &race.second].into_iter().any(|op| {
            let kernel = [op.kernel.as_deref(), op.kernel_symbol.as_deref()]
                .into_iter()
                .flatten()
                .any(|k| matches(&self.pattern, k));
            kernel
                || match self.scope {
                    Scope::AnyFrame => op.site.iter().any(|f| self.matches_frame(f)),
                    Scope::Top => program_frame(&op.site).is_some_and(|f| self.matches_frame(f)),
                }
        })
    }

    fn matches_frame(&self, frame: &Frame) -> bool {
        [frame.function.as_deref(), frame.file.as_deref(), frame.module.as_deref()]
            .into_iter()
            .flatten()
            .any(|text| matches(&self.pattern, text))
    }
}

/// ThreadSanitizer's pattern match: `*` is any run, `^`/`$` anchor, unanchored ends float.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (start, pattern) = match pattern.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (end, pattern) = match pattern.strip_suffix('$') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut at = 0;
    for (i, part) in parts.iter().enumerate() {
        let first = i == 0;
        let last = i == parts.len() - 1;
        if part.is_empty() {
            continue;
        }
        if first && start {
            if !text.starts_with(part) {
                return false;
            }
            at = part.len();
        } else if last && end {
            return text.len() >= at + part.len() && text.ends_with(part);
        } else {
            match text[at..].find(part) {
                Some(found) => at += found + part.len(),
                None => return false,
            }
        }
    }
    // A trailing `*`, or no `$`, lets anything follow; `$` after a `*` or an empty pattern
    // matches any end.
    !end || parts.last().is_some_and(|p| p.is_empty()) || at == text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_in_thread_sanitizer() {
        assert!(matches("scale", "void scale<float>(float*)"));
        assert!(matches("^void", "void scale<float>(float*)"));
        assert!(!matches("^scale", "void scale<float>(float*)"));
        assert!(matches("(float*)$", "void scale<float>(float*)"));
        assert!(!matches("float$", "void scale<float>(float*)"));
        assert!(matches("sc*le", "scale"));
        assert!(matches("^sc*le$", "scale"));
        assert!(!matches("^sc*le$", "scales"));
        assert!(matches("libtorch*.so", "/venv/torch/lib/libtorch_cuda.so"));
        assert!(matches("*", "anything"));
        assert!(matches("^a*$", "abc"));
        // An anchored end is the text's end, found however often the part occurs before it.
        assert!(matches("foo$", "foofoo"));
        assert!(matches("^abc*def$", "abcdef"));
        // Anchored at both ends, the parts may not overlap.
        assert!(!matches("^ab*bc$", "abc"));
        // Each part is looked for after the one before.
        assert!(!matches("a*a", "a"));
    }

    #[test]
    fn lines_parse_or_say_what_is_wrong() {
        let s = Suppressions::parse("# comment\n\nrace:scale\nrace_top:train.py  # trailing\nfree-race:libcupy*\n")
            .unwrap();
        assert_eq!(s.rules.len(), 3);
        assert_eq!(s.rules[2].kind, Some(RaceKind::FreeRace));
        assert_eq!(s.rules[1].scope, Scope::Top);
        let e = Suppressions::parse("race:a\nthread:b\n").unwrap_err();
        assert!(e.0.starts_with("2: unknown type \"thread\""), "{e}");
        assert!(Suppressions::parse("race").unwrap_err().0.contains("type:pattern"));
        assert!(Suppressions::parse("race:  ").unwrap_err().0.contains("empty pattern"));
    }
}
