//! Device time, for benchmarks: with `STANDIN_KERNEL_NS=n`, every launch keeps the
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

struct DeviceTime {
    /// Device time per launch.
    kernel_ns: u64,
    origin: Instant,
    /// When the last launch ends, in nanoseconds from `origin`.
    busy_until: AtomicU64,
}

impl DeviceTime {
    fn new(kernel_ns: u64) -> DeviceTime {
        DeviceTime { kernel_ns, origin: Instant::now(), busy_until: AtomicU64::new(0) }
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

/// The device's time, if `STANDIN_KERNEL_NS` turns it on.
fn device_time() -> Option<&'static DeviceTime> {
    static DEVICE_TIME: OnceLock<Option<DeviceTime>> = OnceLock::new();
    DEVICE_TIME
        .get_or_init(|| {
            let ns = std::env::var("STANDIN_KERNEL_NS").ok().and_then(|n| n.parse().ok()).filter(|&n| n > 0);
            ns.map(DeviceTime::new)
        })
        .as_ref()
}

/// A launch was accepted: the device works on it after the work before it.
pub fn launched() {
    if let Some(device) = device_time() {
        device.launched();
    }
}

/// A synchronize: returns once the device is idle.
pub fn wait() {
    if let Some(device) = device_time() {
        device.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Launches queue one after another however fast they come, and a wait ends no earlier
    /// than the last of them.
    #[test]
    fn a_wait_lasts_until_the_last_launch_ended() {
        let device = DeviceTime::new(2_000_000);
        let start = Instant::now();
        for _ in 0..3 {
            device.launched();
        }
        device.wait();
        assert!(start.elapsed().as_nanos() >= 6_000_000, "waited {:?}", start.elapsed());
        // The device is idle now: a wait returns at once, and the next launch starts now.
        device.wait();
        device.launched();
        assert!(device.busy_until.load(Ordering::Acquire) >= device.now());
    }
}
