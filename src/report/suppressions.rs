//! Suppressions, in ThreadSanitizer's format: one `type:pattern` per line (`race`, `race_top`
//! or a race kind), `#` starting a comment, matched against the frames and kernels of a race.
//! Automatons find, in a race's texts, the rules that may match (each rule's longest literal
//! part occurs); only those are matched in full.

use std::fmt;
use std::path::Path;

use aho_corasick::AhoCorasick;

use super::frames::program_frame;
use super::{Frame, RaceKind, RaceReport};
use crate::options::shown_path;

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
#[derive(Clone, Debug, Default)]
pub struct Suppressions {
    rules: Vec<Rule>,
    /// The rules' longest literal parts, [`PARTS_PER_AUTOMATON`] to an automaton.
    parts: Vec<AhoCorasick>,
    /// For each part of `parts`, the rules it stands for.
    rules_of_part: Vec<Vec<usize>>,
    /// Rules without a literal part (`*`): candidates for every race.
    always: Vec<usize>,
}

/// The parts one automaton finds: building one grows faster than its parts when they share
/// prefixes, as the functions of one program do.
const PARTS_PER_AUTOMATON: usize = 8192;

impl PartialEq for Suppressions {
    fn eq(&self, other: &Suppressions) -> bool {
        self.rules == other.rules
    }
}

impl Eq for Suppressions {}

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
            .map_err(|e| SuppressionError(format!("cannot read the suppressions file {}: {e}", shown_path(path))))?;
        Suppressions::parse(&text).map_err(|e| SuppressionError(format!("{}:{e}", shown_path(path))))
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
        Suppressions::compile(rules)
    }

    fn compile(rules: Vec<Rule>) -> Result<Suppressions, SuppressionError> {
        let mut part_index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut parts: Vec<&str> = Vec::new();
        let mut rules_of_part: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            match rule.longest_part() {
                "" => always.push(i),
                part => {
                    let at = *part_index.entry(part).or_insert_with(|| {
                        parts.push(part);
                        rules_of_part.push(Vec::new());
                        parts.len() - 1
                    });
                    rules_of_part[at].push(i);
                }
            }
        }
        let parts = parts
            .chunks(PARTS_PER_AUTOMATON)
            .map(AhoCorasick::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SuppressionError(format!("cannot compile the suppressions: {e}")))?;
        Ok(Suppressions { rules, parts, rules_of_part, always })
    }

    /// Whether a rule suppresses `race`.
    pub fn suppresses(&self, race: &RaceReport) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        let mut candidates = self.always.clone();
        for (chunk, parts) in self.parts.iter().enumerate() {
            for text in texts(race) {
                for found in parts.find_overlapping_iter(text) {
                    let part = chunk * PARTS_PER_AUTOMATON + found.pattern().as_usize();
                    candidates.extend(&self.rules_of_part[part]);
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .map(|i| &self.rules[i])
            .any(|rule| rule.kind.is_none_or(|k| k == race.kind) && rule.matches(race))
    }
}

/// Every text of `race` a rule may match: its operations' kernels and frames.
fn texts(race: &RaceReport) -> impl Iterator<Item = &str> {
    [&race.first, &race.second].into_iter().flat_map(|op| {
        let kernels = [op.kernel.as_deref(), op.kernel_symbol.as_deref()].into_iter().flatten();
        let frames = op
            .site
            .iter()
            .flat_map(|f| [f.function.as_deref(), f.file.as_deref(), f.module.as_deref()].into_iter().flatten());
        kernels.chain(frames)
    })
}

impl Rule {
    /// The longest run of the pattern without `*` (anchors left out): any text the rule
    /// matches holds it.
    fn longest_part(&self) -> &str {
        let pattern = self.pattern.strip_prefix('^').unwrap_or(&self.pattern);
        let pattern = pattern.strip_suffix('$').unwrap_or(pattern);
        pattern.split('*').max_by_key(|part| part.len()).unwrap_or("")
    }

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

    /// The first race of an example report, its first operation's top frame renamed.
    fn race_in(function: &str) -> RaceReport {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/cross-stream-raw.json");
        let mut race = crate::report::Report::read_from(Path::new(path)).unwrap().races.swap_remove(0);
        race.first.site[0].function = Some(function.to_string());
        race
    }

    /// Rules are found among many, in any automaton, with or without a literal part, and
    /// still matched in full (anchors, kinds).
    #[test]
    fn a_rule_is_found_among_many_and_matched_in_full() {
        let mut text: String = (0..20_000).map(|i| format!("race:never_{i}\n")).collect();
        text.push_str("race:^exact_name$\nfree-race:other_kind\n");
        let s = Suppressions::parse(&text).unwrap();
        assert!(s.suppresses(&race_in("never_19999")));
        assert!(s.suppresses(&race_in("never_5")));
        assert!(s.suppresses(&race_in("exact_name")));
        assert!(!s.suppresses(&race_in("not_exact_name")), "anchored");
        assert!(!s.suppresses(&race_in("other_kind")), "a rule for another kind");
        assert!(!s.suppresses(&race_in("unlisted")));
        let everything = Suppressions::parse("race:*\n").unwrap();
        assert!(everything.suppresses(&race_in("unlisted")), "a rule without a literal part");
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
