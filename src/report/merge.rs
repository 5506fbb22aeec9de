//! Several reports as one: the processes of one job (`torchrun`, `multiprocessing`), or
//! several runs. A race seen in two reports (the same kind and hazard, the same operations
//! at the same call sites) is one entry, its counts added; notes likewise.

use std::collections::BTreeMap;

use super::text::describe_site;
use super::{NoteReport, OpReport, RaceReport, Report};

fn op_key(op: &OpReport) -> String {
    let test = op.test.as_deref().unwrap_or("");
    format!("{} {} {} {test}", op.api, op.kernel.as_deref().unwrap_or(""), describe_site(&op.site))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Races are one entry when they are the same race: the same kind and hazard are not
    /// enough, their operations must be the same calls at the same places too.
    #[test]
    fn races_merge_when_their_operations_are_the_same() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/cross-stream-raw.json");
        let report = Report::read_from(std::path::Path::new(path)).unwrap();
        let race = report.races[0].clone();
        let mut elsewhere = race.clone();
        elsewhere.second.api = "cuMemcpyDtoHAsync_v2".into();
        let one = Report { races: vec![race.clone(), elsewhere.clone()], ..report.clone() };
        let merged = merge(&[one.clone(), Report { races: vec![race.clone()], ..report }]);
        let counts: Vec<(String, u64)> = merged.races.iter().map(|r| (r.second.api.clone(), r.count)).collect();
        assert_eq!(counts, [(race.second.api.clone(), 2 * race.count), (elsewhere.second.api, race.count)]);
    }

    /// Notes merge the same way (kind, call, place), and what is per process adds up.
    #[test]
    fn notes_merge_and_counts_add_up() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/notes.json");
        let mut report = Report::read_from(std::path::Path::new(path)).unwrap();
        report.intercepted = [("cuLaunchKernel".to_string(), 3)].into();
        report.summary.suppressed = 1;
        let merged = merge(&[report.clone(), report.clone()]);
        let notes: Vec<(String, u64)> = merged.notes.iter().map(|n| (n.kind.to_string(), n.count)).collect();
        let twice: Vec<(String, u64)> = report.notes.iter().map(|n| (n.kind.to_string(), 2 * n.count)).collect();
        assert_eq!((notes.len(), notes), (2, twice));
        assert_eq!(merged.intercepted["cuLaunchKernel"], 6);
        assert_eq!(merged.summary.suppressed, 2);
    }
}
