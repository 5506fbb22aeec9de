//! Reports as text, the way ThreadSanitizer prints them: the operation that exposed the
//! race first, then the earlier one, the buffer's allocation, the missing wait, and a
//! `SUMMARY:` line.

use std::fmt::Write;

use super::{describe_site, Frame, OpReport, RaceReport, Report};

const RULE: &str = "==================";

fn frames(out: &mut String, frames: &[Frame]) {
    if frames.is_empty() {
        let _ = writeln!(out, "    (no call site)");
    }
    for (i, f) in frames.iter().enumerate() {
        let _ = write!(out, "    #{i} {}", f.function.as_deref().unwrap_or("<unknown>"));
        if let Some(file) = &f.file {
            let _ = write!(out, " {file}");
            if let Some(line) = f.line {
                let _ = write!(out, ":{line}");
            }
        }
        match &f.module {
            Some(module) => {
                let _ = writeln!(out, " ({} {})", module.rsplit('/').next().unwrap_or(module), f.address);
            }
            None => {
                let _ = writeln!(out, " ({})", f.address);
            }
        }
    }
}

fn what(op: &OpReport) -> String {
    let action = match op.access.as_str() {
        "alloc" => "Allocation".to_string(),
        "free" => "Free".to_string(),
        access => {
            let mut a = access.to_string();
            a[..1].make_ascii_uppercase();
            match &op.range {
                Some(r) => format!("{a} of [{}, {})", r.start, r.end),
                None => a,
            }
        }
    };
    let by = match &op.kernel {
        Some(kernel) => format!("kernel {kernel} ({})", op.api),
        None => op.api.clone(),
    };
    if op.api == "host" {
        // A load or store of the host (a host race), not a driver call.
        return format!("{action} by the host, thread T{}", op.thread.id);
    }
    format!("{action} by {by} on {}, thread T{}", op.stream.label, op.thread.id)
}

fn lowercase_first(s: &str) -> String {
    let mut s = s.to_string();
    s[..1].make_ascii_lowercase();
    s
}

/// One race as a warning block.
pub fn race(race: &RaceReport) -> String {
    let mut out = String::new();
    let hazard = race.hazard.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
    let _ = writeln!(out, "{RULE}");
    let _ = writeln!(
        out,
        "WARNING: streamsan: {}{hazard} on buffer {} ({} bytes, {})",
        race.kind, race.buffer.address, race.buffer.size, race.buffer.kind
    );
    let _ = writeln!(out, "  {}:", what(&race.second));
    frames(&mut out, &race.second.site);
    let _ = writeln!(out, "  Previous {}:", lowercase_first(&what(&race.first)));
    frames(&mut out, &race.first.site);
    if race.first.access != "alloc" {
        let _ = writeln!(out, "  Buffer allocated by {} on {}:", race.buffer.allocation.api, race.buffer.allocation.stream.label);
        frames(&mut out, &race.buffer.allocation.site);
    }
    let _ = writeln!(out, "  Missing wait: {}", race.missing_wait.text);
    if race.count > 1 {
        let _ = writeln!(out, "  Occurred {} times.", race.count);
    }
    let _ = writeln!(out, "SUMMARY: streamsan: {} {}", race.kind, describe_site(&race.second.site));
    let _ = writeln!(out, "{RULE}");
    out
}

/// A whole report: every race, every note, and a summary line.
pub fn report(report: &Report) -> String {
    let mut out = String::new();
    for r in &report.races {
        out.push_str(&race(r));
    }
    for note in &report.notes {
        let times = if note.count > 1 { format!(" ({} times)", note.count) } else { String::new() };
        let _ = writeln!(out, "NOTE: streamsan: {}{times}: {} at {}", note.kind, note.message, describe_site(&note.site));
    }
    let _ = writeln!(out, "{}", summary(report));
    out
}

/// `streamsan: 3 races (2 cross-stream-race, 1 free-race), 1 suppressed`, or `streamsan: no
/// race`.
pub fn summary(report: &Report) -> String {
    let s = &report.summary;
    let kinds: Vec<String> = s.by_kind.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
    let mut line = match s.races {
        0 => "streamsan: no race".to_string(),
        1 => format!("streamsan: 1 race ({})", kinds.join(", ")),
        n => format!("streamsan: {n} races ({})", kinds.join(", ")),
    };
    if s.suppressed > 0 {
        line.push_str(&format!(", {} suppressed", s.suppressed));
    }
    line
}
