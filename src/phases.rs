//! Where an intercepted call's time goes, phase by phase (`phase_times=1`): the shim and the
//! model time each phase of their work on per-thread-shard counters, and the totals are
//! printed at exit. Off, a phase costs one relaxed load and a branch.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A phase of an intercepted call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Unwinding and interning the native call stack.
    CallSite,
    /// Walking and interning Python frames (inside `CallSite`).
    PythonFrames,
    /// Unwinding a native chain the thread had not remembered (inside `CallSite`): its count
    /// is the captures that missed, against `CallSite`'s count of all captures.
    Unwind,
    /// Interning a stack of a native chain and Python frames not met together before
    /// (inside `CallSite`).
    MixedStack,
    /// The real driver's `cuLaunchKernel` (and its `Ex` and cooperative forms).
    LaunchDriver,
    /// Finding a launched kernel's name and parameter layout.
    KernelInfo,
    /// Reading the parameter words of a launch for pointers.
    ParamScan,
    /// The happens-before model for a launch or an NCCL call: clocks, buffers, shadow checks
    /// (the call site excluded; a new race's report, [`Phase::Report`], included).
    Model,
    /// The same for a copy, with its list of accesses built.
    CopyModel,
    /// The same for a memset, with its list of accesses built.
    MemsetModel,
    /// The same for an event record or a stream's wait for an event.
    EventModel,
    /// The model's batch told on a program's thread, not the watcher's: the updates above
    /// of what it told (counted there too), and the wait for a batch another thread was
    /// telling. What a call that reads the model (or, with the host-race guard on, a copy the
    /// host waits for) costs its thread for the work queued before it.
    ProgramSettle,
    /// A new race: its report built, printed, written.
    Report,
    /// Waiting for a stream's, buffer's or event's lock held by another thread.
    LockWait,
    /// `footprint=learn`: before a launch's real call, its words read and its learnt
    /// footprint looked up (every launch).
    FootprintPlan,
    /// `footprint=exact|learn`: a launch to measure sent to its twin (twin, table, module
    /// variables copied in) before its real call, and its variables copied back after it.
    FootprintArm,
    /// `footprint=exact|learn`: at a synchronizing call, the footprints of the launches it
    /// completed read and checked.
    FootprintCollect,
    /// Checking a measured launch against what was issued before and after it (inside
    /// `FootprintCollect`).
    FootprintCheck,
    /// Learning a measured launch's footprint (inside `FootprintCollect`).
    FootprintLearn,
}

const PHASES: usize = 19;
const ALL: [Phase; PHASES] = [
    Phase::CallSite,
    Phase::PythonFrames,
    Phase::Unwind,
    Phase::MixedStack,
    Phase::LaunchDriver,
    Phase::KernelInfo,
    Phase::ParamScan,
    Phase::Model,
    Phase::CopyModel,
    Phase::MemsetModel,
    Phase::EventModel,
    Phase::ProgramSettle,
    Phase::Report,
    Phase::LockWait,
    Phase::FootprintPlan,
    Phase::FootprintArm,
    Phase::FootprintCollect,
    Phase::FootprintCheck,
    Phase::FootprintLearn,
];

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::CallSite => "call-site capture",
            Phase::PythonFrames => "  of which Python frames",
            Phase::Unwind => "  of which unwinds (chain not remembered)",
            Phase::MixedStack => "  of which native+Python stacks interned",
            Phase::LaunchDriver => "launches in the driver",
            Phase::KernelInfo => "kernel name and layout",
            Phase::ParamScan => "parameter scan",
            Phase::Model => "model update: launches, NCCL",
            Phase::CopyModel => "model update: copies",
            Phase::MemsetModel => "model update: memsets",
            Phase::EventModel => "model update: records, waits",
            Phase::ProgramSettle => "batch told on program threads",
            Phase::Report => "race reports (in updates)",
            Phase::LockWait => "lock waits (in updates)",
            Phase::FootprintPlan => "footprint: plan",
            Phase::FootprintArm => "footprint: arm",
            Phase::FootprintCollect => "footprint: collect",
            Phase::FootprintCheck => "  of which checks before and after",
            Phase::FootprintLearn => "  of which learning",
        }
    }
}

/// A quantity counted beside the phases, to say why a phase costs what it costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    /// Frames of the native chains unwound (the shim's included), each read again from the
    /// stack at every later capture of the chain.
    ChainFrames,
    /// Parameter words a launch's scan read.
    ParamWords,
    /// Accesses a launch told the model (pointers found among its words).
    LaunchAccesses,
    /// Records in the shadow of the buffer an access is checked against, when checked.
    ShadowRecords,
    /// Records an access was compared with for conflicts (none when one stream holds all).
    RecordsCompared,
    /// `footprint=learn`: words of a measured launch compared with earlier launches' words.
    LearnWordsCompared,
    /// `footprint=learn`: learnt keys filed again because a word left or rejoined the key.
    LearnKeysRefiled,
    /// `footprint=learn`: buffers looked up to attribute a measured launch's ranges.
    LearnBufferLookups,
}

const TALLIES: usize = 8;
const ALL_TALLIES: [Tally; TALLIES] = [
    Tally::ChainFrames,
    Tally::ParamWords,
    Tally::LaunchAccesses,
    Tally::ShadowRecords,
    Tally::RecordsCompared,
    Tally::LearnWordsCompared,
    Tally::LearnKeysRefiled,
    Tally::LearnBufferLookups,
];

impl Tally {
    fn label(self) -> &'static str {
        match self {
            Tally::ChainFrames => "frames of chains unwound",
            Tally::ParamWords => "parameter words read",
            Tally::LaunchAccesses => "accesses told by launches",
            Tally::ShadowRecords => "shadow records at each access",
            Tally::RecordsCompared => "records compared for conflicts",
            Tally::LearnWordsCompared => "learning: words compared",
            Tally::LearnKeysRefiled => "learning: keys filed again",
            Tally::LearnBufferLookups => "learning: buffers looked up",
        }
    }
}

crate::hot! {
    static ENABLED: AtomicBool = AtomicBool::new(false);
}

/// When timing began, on both clocks, to convert ticks at the end.
static ORIGIN: OnceLock<(u64, Instant)> = OnceLock::new();

/// How many rows per-thread counters are split into ([`shard`]).
pub const SHARDS: usize = 16;

#[repr(align(64))]
struct Row {
    ticks: [AtomicU64; PHASES],
    counts: [AtomicU64; PHASES],
    tallies: [AtomicU64; TALLIES],
}

static ROWS: [Row; SHARDS] = [const {
    Row {
        ticks: [const { AtomicU64::new(0) }; PHASES],
        counts: [const { AtomicU64::new(0) }; PHASES],
        tallies: [const { AtomicU64::new(0) }; TALLIES],
    }
}; SHARDS];

/// The calling thread's row of a per-thread-sharded counter, below [`SHARDS`].
#[inline]
pub fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.try_with(|s| *s).unwrap_or(0)
}

#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        ORIGIN.get().map_or(0, |(_, start)| start.elapsed().as_nanos() as u64)
    }
}

/// Turns timing on (once, at load, before any call is timed).
pub fn enable() {
    ORIGIN.get_or_init(|| (ticks(), Instant::now()));
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether timing is on.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The time now, in ticks, if timing is on: the start of a span measured by hand with
/// [`since`] (per entry point, in the shim's call counts), where a [`Phase`] does not fit.
#[inline]
pub fn now() -> Option<u64> {
    enabled().then(ticks)
}

/// Ticks since `start`, a time from [`now`].
#[inline]
pub fn since(start: u64) -> u64 {
    ticks().wrapping_sub(start)
}

/// Milliseconds in `ticks` ticks.
pub fn millis(ticks: u64) -> f64 {
    ticks as f64 * nanos_per_tick() / 1e6
}

/// Times a phase until dropped; inert when timing is off.
pub struct Timer {
    phase: Phase,
    start: u64,
}

/// Starts timing `phase`, if timing is on.
#[inline]
pub fn start(phase: Phase) -> Option<Timer> {
    enabled().then(|| Timer { phase, start: ticks() })
}

/// Times `f` as `phase`.
#[inline]
pub fn time<R>(phase: Phase, f: impl FnOnce() -> R) -> R {
    let _timer = start(phase);
    f()
}

impl Drop for Timer {
    #[inline]
    fn drop(&mut self) {
        let row = &ROWS[shard()];
        row.ticks[self.phase as usize].fetch_add(since(self.start), Ordering::Relaxed);
        row.counts[self.phase as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// Adds `n` to `tally`, if timing is on.
#[inline]
pub fn tally(tally: Tally, n: usize) {
    if enabled() {
        ROWS[shard()].tallies[tally as usize].fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Nanoseconds per tick, measured over the run.
fn nanos_per_tick() -> f64 {
    match ORIGIN.get() {
        #[cfg(target_arch = "x86_64")]
        Some(&(start, wall)) => {
            let elapsed = ticks().wrapping_sub(start) as f64;
            if elapsed > 0.0 {
                wall.elapsed().as_nanos() as f64 / elapsed
            } else {
                0.0
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Some(_) => 1.0,
        None => 0.0,
    }
}

/// The table printed at exit: per phase, how many times it ran, its total and its mean.
pub fn table() -> String {
    let scale = nanos_per_tick();
    let mut out = String::from("streamsan: time per phase of the intercepted calls (phase_times=1)\n");
    out.push_str(&format!("  {:<26} {:>12} {:>12} {:>10}\n", "phase", "times", "total ms", "ns each"));
    for phase in ALL {
        let sum = |f: fn(&Row) -> &[AtomicU64; PHASES]| {
            ROWS.iter().map(|r| f(r)[phase as usize].load(Ordering::Relaxed)).sum::<u64>()
        };
        let (ticks, count) = (sum(|r| &r.ticks), sum(|r| &r.counts));
        let nanos = ticks as f64 * scale;
        let each = if count > 0 { nanos / count as f64 } else { 0.0 };
        out.push_str(&format!("  {:<26} {:>12} {:>12.3} {:>10.0}\n", phase.label(), count, nanos / 1e6, each));
    }
    let launches: u64 = ROWS.iter().map(|r| r.counts[Phase::Model as usize].load(Ordering::Relaxed)).sum();
    out.push_str(&format!("  {:<32} {:>12} {:>12}\n", "counted", "in all", "a launch"));
    for tally in ALL_TALLIES {
        let total: u64 = ROWS.iter().map(|r| r.tallies[tally as usize].load(Ordering::Relaxed)).sum();
        let each = if launches > 0 { total as f64 / launches as f64 } else { 0.0 };
        out.push_str(&format!("  {:<32} {:>12} {:>12.1}\n", tally.label(), total, each));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_phases_are_counted_and_shown() {
        assert!(start(Phase::ParamScan).is_none(), "off until enabled");
        enable();
        time(Phase::ParamScan, || std::thread::sleep(std::time::Duration::from_millis(2)));
        let table = table();
        let row = table.lines().find(|l| l.contains("parameter scan")).expect("a row per phase");
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[2], "1", "{row}");
        let total_ms: f64 = fields[3].parse().expect("a total");
        assert!(total_ms >= 1.5, "the sleep is in the total: {row}");
        tally(Tally::ParamWords, 42);
        let table = self::table();
        let row = table.lines().find(|l| l.contains("parameter words read")).expect("a row per tally");
        assert_eq!(row.split_whitespace().nth(3), Some("42"), "{row}");
    }
}
