//! A device clock, for benchmarks: with `STANDIN_KERNEL_NS=n`, every launch keeps the
//! device busy for `n` nanoseconds after the later of its call and the end of the launch
//! before it, and a synchronize (of a context, a stream or an event) returns once the last
//! launch ended. Unset, launches end at once, as everywhere else in the stand-in.
//!
//! Why: a real program's synchronize waits for its GPU, and what the shim does meanwhile
//! (its watcher telling the model what the program queued) costs the program nothing while
//! the device still works, and all of it once the device is idle. A device that finishes
//! every launch at once cannot show which (`streamsan-bench`'s `training_step_synced`).
//!
//! One queue for the whole device, whatever the stream: it orders nothing the model
//! checks (queries still answer done at once) and only times the waits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

struct Clock {
    /// Device time per launch.
    kernel_ns: u64,
    origin: Instant,
    /// When the last launch ends, in nanoseconds from `origin`.
    busy_until: AtomicU64,
}

impl Clock {
    fn new(kernel_ns: u64) -> Clock {
        Clock { kernel_ns, origin: Instant::now(), busy_until: AtomicU64::new(0) }
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    fn launched(&self) {
        let now = self.now();
        let _ = self
            .busy_until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |end| Some(end.max(now) + self.kernel_ns));
    }

    /// Spins and yields, as the driver's default scheduling does, so that the program's
    /// other threads run meanwhile.
    fn wait(&self) {
        let end = self.busy_until.load(Ordering::Acquire);
        while self.now() < end {
            std::thread::yield_now();
        }
    }
}

/// The device's clock, if `STANDIN_KERNEL_NS` turns it on.
fn clock() -> Option<&'static Clock> {
    static CLOCK: OnceLock<Option<Clock>> = OnceLock::new();
    CLOCK
        .get_or_init(|| {
            let ns = std::env::var("STANDIN_KERNEL_NS").ok().and_then(|n| n.parse().ok()).filter(|&n| n > 0);
            ns.map(Clock::new)
        })
        .as_ref()
}

/// A launch was accepted: the device works on it after the work before it.
pub fn launched() {
    if let Some(clock) = clock() {
        clock.launched();
    }
}

/// A synchronize: returns once the device is idle.
pub fn wait() {
    if let Some(clock) = clock() {
        clock.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Launches queue one after another however fast they come, and a wait ends no earlier
    /// than the last of them.
    #[test]
    fn a_wait_lasts_until_the_last_launch_ended() {
        let clock = Clock::new(2_000_000);
        let start = Instant::now();
        for _ in 0..3 {
            clock.launched();
        }
        clock.wait();
        assert!(start.elapsed().as_nanos() >= 6_000_000, "waited {:?}", start.elapsed());
        // The device is idle now: a wait returns at once, and the next launch starts now.
        clock.wait();
        clock.launched();
        assert!(clock.busy_until.load(Ordering::Acquire) >= clock.now());
    }
}
