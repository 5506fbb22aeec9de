//! Work told to the model in batches: kernel launches and asynchronous memsets wait in one
//! queue for the process, in the order they were made, and the model is told of them all
//! in a row when the queue is full, or before anything else is told to the model or asked
//! of it ([`settle`], which [`super::model::model`] calls).
//!
//! Why: between two launches the framework and the driver evict the model's data and code
//! from the caches (`reports/perf/runs/13-cold-bench/`); told many launches in a row, the
//! model finds its code and the streams and buffers of the previous launch warm. On the
//! bench with the caches evicted between calls this takes a third off a launch's model
//! update and three quarters off a memset's (`reports/perf/runs/16-batch/`); on the H100 a
//! GPT-2 launch's update stayed at 2.9 µs (`reports/gpu/435bd19/`): there the update's own
//! work is what costs.
//!
//! Why it finds what telling each at once finds: the queue is applied in the order the
//! calls were made, under its lock, and every other call into the model applies it first,
//! so the model meets the same operations in the same order. What moves is when a race
//! among queued work is reported: at the next call that settles, at most [`CAPACITY`]
//! launches later, at exit at the latest. With `halt_on_error=1` nothing waits, so that the
//! program stops at the racy call itself.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use streamsan::model::op::{Access, KernelId, Origin};
use streamsan::model::streams::StreamRef;
use streamsan::model::{Model, Work};
use streamsan::phases::{self, Phase};

use crate::intercept::options::options;

/// Operations queued at most: a race among them is reported this many launches late at most.
const CAPACITY: usize = 64;

/// An operation waiting to be told: its `Work`, with its accesses in [`Queue::accesses`].
struct Queued {
    on: StreamRef,
    origin: Origin,
    kernel: Option<KernelId>,
    accesses: (u32, u32),
    /// The phase its model update is timed as.
    phase: Phase,
}

struct Queue {
    work: Vec<Queued>,
    accesses: Vec<Access>,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue { work: Vec::new(), accesses: Vec::new() });
/// Whether the queue holds anything: read without the lock by every settle.
static WAITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread is telling the model the queue's work: a race found there reaches the
    /// report sink, which asks the model, which must not settle again.
    static TELLING: Cell<bool> = const { Cell::new(false) };
}

/// Queues `work` on `on` (an operation without effect on the host), whose model update is
/// timed as `phase`; tells the model the whole queue when it is full. With
/// `halt_on_error=1`, tells the model at once.
pub fn queue(model: &Model, on: StreamRef, work: Work<'_>, phase: Phase) {
    if options().halt_on_error {
        let _timer = phases::start(phase);
        model.work(on, work);
        return;
    }
    let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    let start = queue.accesses.len() as u32;
    queue.accesses.extend_from_slice(work.accesses);
    let end = queue.accesses.len() as u32;
    queue.work.push(Queued { on, origin: work.origin, kernel: work.kernel, accesses: (start, end), phase });
    if queue.work.len() >= CAPACITY {
        tell(model, &mut queue);
    } else {
        WAITING.store(true, Ordering::Relaxed);
    }
}

/// Tells the model everything queued, in order. A call that happened after a queued one
/// (on any thread) sees it here: the queue's lock orders them.
pub fn settle(model: &Model) {
    if !WAITING.load(Ordering::Relaxed) || TELLING.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    tell(model, &mut queue);
}

fn tell(model: &Model, queue: &mut Queue) {
    let _ = TELLING.try_with(|telling| telling.set(true));
    let Queue { work, accesses } = queue;
    for queued in work.drain(..) {
        let (start, end) = queued.accesses;
        let _timer = phases::start(queued.phase);
        let work = Work {
            origin: queued.origin,
            kernel: queued.kernel,
            accesses: &accesses[start as usize..end as usize],
            host: Default::default(),
        };
        model.work(queued.on, work);
    }
    accesses.clear();
    WAITING.store(false, Ordering::Relaxed);
    let _ = TELLING.try_with(|telling| telling.set(false));
}

/// Whether work waits in the queue.
#[cfg(test)]
pub fn waiting() -> bool {
    WAITING.load(Ordering::Relaxed)
}
