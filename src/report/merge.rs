//! Several reports as one: the processes of one job (`torchrun`, `multiprocessing`), or
//! several runs. A race seen in two reports (the same kind and hazard, the same operations
//! at the same call sites) is one entry, its counts added; notes likewise.

use std::collections::BTreeMap;

use super::text::describe_site;
use super::{NoteReport, OpReport, RaceReport, Report};

fn op_key(op: &OpReport) -> String {
    format!("{} {} {}", op.api, op.kernel.as_deref().unwrap_or(""), describe_site(&op.site))
}

fn race_key(race: &RaceReport) -> String {
    let hazard = race.hazard.map(|h| h.as_str()).unwrap_or("");
    format!("{} {hazard} | {} | {}", race.kind, op_key(&race.first), op_key(&race.second))
}

fn note_key(note: &NoteReport) -> String {
    format!("{} {} {}", note.kind, note.api, describe_site(&note.site))
}

/// The races and notes of `reports`, deduplicated, in first-seen order; what is per process
/// (pid, command, calls intercepted) is summed or left empty.
pub fn merge(reports: &[Report]) -> Report {
    let mut merged = Report::new(0, Vec::new());
    let mut races: BTreeMap<String, usize> = BTreeMap::new();
    let mut notes: BTreeMap<String, usize> = BTreeMap::new();
    for report in reports {
        for race in &report.races {
            match races.get(&race_key(race)) {
                Some(&i) => merged.races[i].count += race.count,
                None => {
                    races.insert(race_key(race), merged.races.len());
                    merged.races.push(race.clone());
                }
            }
        }
        for note in &report.notes {
            match notes.get(&note_key(note)) {
                Some(&i) => merged.notes[i].count += note.count,
                None => {
                    notes.insert(note_key(note), merged.notes.len());
                    merged.notes.push(note.clone());
                }
            }
        }
        for (name, n) in &report.intercepted {
            *merged.intercepted.entry(name.clone()).or_insert(0) += n;
        }
        merged.summary.suppressed += report.summary.suppressed;
    }
    merged.summarize();
    merged
}
