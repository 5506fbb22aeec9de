//! Every word of a report, in one place: the ThreadSanitizer-style listing (the operation
//! that exposed the race first, then the earlier one, the buffer's allocation, the missing
//! wait, and a `SUMMARY:` line), and the sentences and names the JSON carries beside its data
//! (the missing wait, notes, stream labels).

use std::fmt::Write;

use crate::model::host_races::HOST_API;
use crate::model::op::ThreadId;
use crate::model::race::{FootprintUnavailable, FootprintUnmeasured};
use crate::model::streams::StreamKind;

use serde::{Serialize, Serializer};

use super::frames::program_frame;
use super::{
    AccessKind, BufferReport, Fix, FixAction, Frame, Hazard, NoteKind, OpReport, Operation, RaceKind, RaceReport,
    Report,
};

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
    let action = match op.access {
        AccessKind::Alloc => "Allocation".to_string(),
        AccessKind::Free => "Free".to_string(),
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
    let test = op.test.as_ref().map(|t| format!(", in test {t}")).unwrap_or_default();
    if op.api == HOST_API {
        // A load or store of the host (a host race), not a driver call.
        return format!("{action} by the host, thread T{}{test}", op.thread.id);
    }
    let process = op.pid.map(|pid| format!(" in process {pid}")).unwrap_or_default();
    format!("{action} by {by} on {}{process}, thread T{}{test}", op.stream.label, op.thread.id)
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
    // An array is named by its handle, and its byte ranges are offsets from its start.
    let on = match race.buffer.kind.as_str() {
        "array" => format!("array {} ({} bytes; ranges are offsets in it)", race.buffer.address, race.buffer.size),
        kind => format!("buffer {} ({} bytes, {kind})", race.buffer.address, race.buffer.size),
    };
    let _ = writeln!(out, "WARNING: streamsan: {}{hazard} on {on}", race.kind);
    let _ = writeln!(out, "  {}:", what(&race.second));
    frames(&mut out, &race.second.site);
    let _ = writeln!(out, "  Previous {}:", lowercase_first(&what(&race.first)));
    frames(&mut out, &race.first.site);
    if race.first.access != AccessKind::Alloc {
        let _ = writeln!(
            out,
            "  Buffer allocated by {} on {}:",
            race.buffer.allocation.api, race.buffer.allocation.stream.label
        );
        frames(&mut out, &race.buffer.allocation.site);
    }
    let _ = writeln!(out, "  Missing wait: {}", missing_wait(race));
    if race.count > 1 {
        let _ = writeln!(out, "  Occurred {} times.", race.count);
    }
    let _ = writeln!(out, "SUMMARY: streamsan: {} {}", race.kind, describe_site(&race.second.site));
    let _ = writeln!(out, "{RULE}");
    out
}

/// A call site in one line: `file:line in function` of its [`program_frame`].
pub fn describe_site(site: &[Frame]) -> String {
    let frame = program_frame(site);
    match frame {
        Some(f) => {
            let function = f.function.as_deref().unwrap_or("<unknown>");
            match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{file}:{line} in {function}"),
                (Some(file), None) => format!("{file} in {function}"),
                _ => format!("{function} ({})", f.module.as_deref().unwrap_or(&f.address)),
            }
        }
        None => "(no call site)".into(),
    }
}

/// How a person names an operation: its kernel or entry point, and where it was called.
pub fn describe(op: &OpReport) -> String {
    let what = match &op.kernel {
        Some(kernel) => format!("{kernel} ({})", op.api),
        None => op.api.clone(),
    };
    match program_frame(&op.site) {
        Some(Frame { file: Some(file), line, .. }) => {
            let file = file.rsplit('/').next().unwrap_or(file);
            match line {
                Some(line) => format!("{what} at {file}:{line}"),
                None => format!("{what} at {file}"),
            }
        }
        _ => what,
    }
}

/// The missing wait of a race in words, from its data.
pub fn missing_wait(race: &RaceReport) -> String {
    let fix = &race.missing_wait;
    let op = |which| match which {
        Operation::First => describe(&race.first),
        Operation::Second => describe(&race.second),
    };
    let (after, before) = (op(fix.after), op(fix.before));
    let (record_on, wait_on) = (&fix.record_on, &fix.wait_on);
    match fix.action {
        FixAction::FreeAfterUse => format!(
            "{after} uses the buffer after {before} freed it: free it after its last use instead (record an event on {record_on} after {after}; make {wait_on} wait on it before the free)"
        ),
        FixAction::HostWaits => format!(
            "make the host wait for {record_on} after {after} (cuStreamSynchronize, or cuEventSynchronize on an event recorded after it) before {before}"
        ),
        FixAction::RecordAndWait => format!("record an event on {record_on} after {after}; make {wait_on} wait on it before {before}"),
        FixAction::IpcEvent => {
            let process = |op: &OpReport| op.pid.map_or_else(|| "this process".to_string(), |pid| format!("process {pid}"));
            let (recorder, waiter) = (process(&race.first), process(&race.second));
            format!(
                "record the IPC event (cuEventCreate with CU_EVENT_INTERPROCESS, its handle from cuIpcGetEventHandle) on {record_on} in {recorder} after {after}; wait on the event opened from that handle (cuIpcOpenEventHandle) on {wait_on} in {waiter} before {before}"
            )
        }
        FixAction::GridDependencyWait => format!(
            "{before} was launched with programmatic stream serialization, or reached through a programmatic graph edge, and may run beside {after}: call cudaGridDependencySynchronize (griddepcontrol.wait) in it before the access, or order it fully (launch it without the attribute; an ordinary edge)"
        ),
    }
}

/// What the report calls the host, as a stream.
pub const HOST_LABEL: &str = "the host";

/// How a report names the owner of a reused slot whose owners since have pushed it out of
/// memory (the operations of a race keep theirs: `Slots::pin`).
pub const FORGOTTEN_LABEL: &str = "a stream destroyed long ago";

/// How a person names a stream.
pub fn stream_label(kind: StreamKind, handle: u64, ctx: u64, thread: ThreadId) -> String {
    match kind {
        StreamKind::LegacyDefault => format!("the legacy default stream (context {ctx:#x})"),
        StreamKind::PerThreadDefault => {
            format!("the per-thread default stream of thread T{} (context {ctx:#x})", thread.0)
        }
        StreamKind::Blocking | StreamKind::NonBlocking => {
            format!("stream {handle:#x} ({})", kind.label())
        }
    }
}

/// How a person names the lane of a graph launch its nodes ran on.
pub fn graph_lane_label(exec: u64, launched_on: &str) -> String {
    format!("a node of graph {exec:#x} launched on {launched_on}")
}

/// A note in words: what `api` did on the stream labelled `on`, `subject` being the handle
/// it is about, `kernel` the launch's kernel where it is about one.
pub fn note_message(kind: NoteKind, api: &str, on: &str, kernel: Option<&str>, subject: u64) -> String {
    match kind {
        NoteKind::WaitOnUnrecordedEvent => {
            format!("{api} on {on} waits on event {subject:#x}, which was never recorded: the wait orders nothing")
        }
        NoteKind::ProgrammaticLaunch => format!(
            "{} was launched on {on} with programmatic stream serialization, or reached through a programmatic graph edge: it may start before the kernel ahead of it completes and is ordered after it only from its grid-dependency wait (cudaGridDependencySynchronize); which of its accesses come before that wait is not known (its code could not be read, or where it waits could not be given to the measurement, or it was not measured), so they are taken as ordered from its start and an access before that wait is not reported",
            kernel.unwrap_or("a kernel")
        ),
        NoteKind::IpcImport => format!(
            "{api} opened {subject:#x} from an IPC handle that no process run under streamsan exported (or one of another run): what the exporting process does with it is not seen, and orders nothing here"
        ),
        NoteKind::GraphNotFollowed => {
            format!("graph {subject:#x} launched on {on} holds work streamsan cannot follow: its work is not checked")
        }
        NoteKind::DestroyedWhilePending => {
            format!("{on} was destroyed while work on it may still run (the host had not synchronized with it)")
        }
        NoteKind::FootprintUnavailable => {
            let why = match subject {
                s if s == FootprintUnavailable::NoLibrary as u64 => "footprint=exact/learn needs the Compute Sanitizer library (libsanitizer-public.so, in a CUDA toolkit's compute-sanitizer/ or `pip install nvidia-cuda-sanitizer-api-cu12`; set CUDA_HOME or STREAMSAN_SANITIZER_LIB)",
                s if s == FootprintUnavailable::OtherSubscriber as u64 => "another tool holds the Compute Sanitizer API (streamsan cannot run under compute-sanitizer)",
                _ => "the Compute Sanitizer API refused to start on this driver or GPU",
            };
            format!("{why}: kernels' footprints are their parameters' pointers (footprint=params)")
        }
        NoteKind::FootprintOverflow => format!(
            "a launch of {} touched more 32 KiB granules than its table holds: the rest of its bytes were taken as one range covering them",
            kernel.unwrap_or("a kernel")
        ),
        NoteKind::FootprintUnmeasured => {
            let why = match subject {
                s if s == FootprintUnmeasured::ModuleState as u64 => format!(
                    "{} is in a module with variables of its own (__device__ or __constant__), which a patched twin of the module would not share",
                    kernel.unwrap_or("a kernel")
                ),
                s if s == FootprintUnmeasured::NoTwin as u64 => format!(
                    "the code of {}'s module could not be loaded a second time as a patched twin",
                    kernel.unwrap_or("a kernel")
                ),
                s if s == FootprintUnmeasured::Refused as u64 => format!(
                    "the driver refused a launch of {} on its module's patched twin (the program's own launch was made)",
                    kernel.unwrap_or("a kernel")
                ),
                _ => "launches found every footprint table waiting to be read (the program did not synchronize for a long time)".into(),
            };
            format!("{why}: its launches' parameters' pointers stood in for what they touched")
        }
        NoteKind::FootprintLearntCover => format!(
            "a launch of {} touched more 32 KiB granules than its table holds; what was learnt of it keeps the cover of the rest as its part in each buffer a parameter points into, applied to later launches",
            kernel.unwrap_or("a kernel")
        ),
        NoteKind::HostGuardGaveUp => format!(
            "the host touched other data on page {subject:#x}, which holds bytes of {api} on {on} in flight, through a system call or over and over: host races on that page went unchecked until it was done"
        ),
    }
}

/// A whole report: every race, every note, and a summary line.
pub fn report(report: &Report) -> String {
    let mut out = String::new();
    for r in &report.races {
        out.push_str(&race(r));
    }
    out.push_str(&after_races(report));
    out
}

/// What [`report`] prints after the races: the notes, and the summary.
pub fn after_races(report: &Report) -> String {
    let mut out = String::new();
    for note in &report.notes {
        let times = if note.count > 1 { format!(" ({} times)", note.count) } else { String::new() };
        let _ =
            writeln!(out, "NOTE: streamsan: {}{times}: {} at {}", note.kind, note.message, describe_site(&note.site));
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

/// A race as the file holds it: its data, and the missing wait in words beside the data
/// (`missing_wait.text`, for readers of the JSON). Read back, the words are left out:
/// [`missing_wait`] gives them from the data.
impl Serialize for RaceReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            kind: RaceKind,
            #[serde(skip_serializing_if = "Option::is_none")]
            hazard: Option<Hazard>,
            count: u64,
            buffer: &'a BufferReport,
            first: &'a OpReport,
            second: &'a OpReport,
            missing_wait: WrittenFix<'a>,
        }
        #[derive(Serialize)]
        struct WrittenFix<'a> {
            text: String,
            #[serde(flatten)]
            fix: &'a Fix,
        }
        Written {
            kind: self.kind,
            hazard: self.hazard,
            count: self.count,
            buffer: &self.buffer,
            first: &self.first,
            second: &self.second,
            missing_wait: WrittenFix { text: missing_wait(self), fix: &self.missing_wait },
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> RaceReport {
        let path = format!("{}/docs/report/examples/{name}.json", env!("CARGO_MANIFEST_DIR"));
        Report::read_from(std::path::Path::new(&path)).unwrap().races.swap_remove(0)
    }

    /// The warning block's lines that depend on the race: the earlier operation in lower
    /// case, where the buffer came from (unless the earlier operation is its allocation),
    /// how often it occurred (only when more than once), a host's access in its own words.
    #[test]
    fn a_race_reads_as_a_warning_block() {
        let mut raw = example("cross-stream-raw");
        let text = race(&raw);
        assert!(text.contains("\n  Read of [0x7f2288c00000, 0x7f2288c00001) by kernel scale"), "{text}");
        assert!(text.contains("\n  Previous read-write of ["), "{text}");
        assert!(text.contains("\n  Buffer allocated by cuMemAlloc_v2 on the host:\n"), "{text}");
        assert!(!text.contains("Occurred"), "once: {text}");
        raw.count = 2;
        assert!(race(&raw).contains("\n  Occurred 2 times.\n"));
        let text = race(&example("use-before-alloc"));
        assert!(!text.contains("Buffer allocated by"), "the earlier operation is the allocation: {text}");
        raw.second.api = HOST_API.into();
        assert!(race(&raw).contains("\n  Read of [0x7f2288c00000, 0x7f2288c00001) by the host, thread T1:\n"));
    }

    #[test]
    fn notes_say_what_happened_and_why() {
        let wait = note_message(NoteKind::WaitOnUnrecordedEvent, "cuStreamWaitEvent", "stream 0x5", None, 0xe);
        assert_eq!(
            wait,
            "cuStreamWaitEvent on stream 0x5 waits on event 0xe, which was never recorded: the wait orders nothing"
        );
        let unmeasured =
            |why: FootprintUnmeasured| note_message(NoteKind::FootprintUnmeasured, "", "", None, why as u64);
        assert!(unmeasured(FootprintUnmeasured::ModuleState).contains("variables of its own"));
        assert!(unmeasured(FootprintUnmeasured::NoTwin).contains("could not be loaded a second time"));
        assert!(unmeasured(FootprintUnmeasured::Refused).contains("refused"));
        assert!(unmeasured(FootprintUnmeasured::NoTable).contains("found every footprint table waiting to be read"));
        let unavailable =
            |why: FootprintUnavailable| note_message(NoteKind::FootprintUnavailable, "", "", None, why as u64);
        assert!(unavailable(FootprintUnavailable::NoLibrary)
            .starts_with("footprint=exact/learn needs the Compute Sanitizer library"));
        assert!(unavailable(FootprintUnavailable::OtherSubscriber)
            .starts_with("another tool holds the Compute Sanitizer API"));
        assert!(unavailable(FootprintUnavailable::Refused).starts_with("the Compute Sanitizer API refused to start"));
    }

    /// A note that occurred more than once says how often, in the whole report's text.
    #[test]
    fn a_report_s_notes_say_how_often() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report/examples/notes.json");
        let mut notes = Report::read_from(std::path::Path::new(path)).unwrap();
        let once = report(&notes);
        assert!(once.contains("NOTE: streamsan: destroyed-while-pending: "), "{once}");
        assert!(!once.contains(" times)"), "{once}");
        notes.notes[0].count = 3;
        assert!(report(&notes).contains("NOTE: streamsan: destroyed-while-pending (3 times): "));
    }

    #[test]
    fn a_site_without_a_line_is_named_by_its_file() {
        let mut site = example("cross-stream-raw").second.site;
        assert_eq!(describe_site(&site), "/work/main/tests/scenarios/semantics.c:119 in launch");
        site[0].line = None;
        assert_eq!(describe_site(&site), "/work/main/tests/scenarios/semantics.c in launch");
    }
}
