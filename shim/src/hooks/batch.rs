//! Work told to the model in batches: launches, memsets, copies, NCCL calls, event records,
//! stream waits and the host's joins wait in one queue for the process, in call order, and
//! the model hears them in a row, from the thread that serves the batch ([`serve_by`]: the
//! watcher) or from the next call that tells or asks the model anything ([`settle`]). The
//! model meets the same operations in the same order as if each were told at once; what
//! moves is when a race among queued work is reported.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use streamsan::model::clock::Epoch;
use streamsan::model::op::{Access, GridWait, HostEffect, KernelId, Origin};
use streamsan::model::streams::StreamRef;
use streamsan::model::{Model, Work};
use streamsan::phases::{self, Phase};

use super::peers;
use crate::host_races;
use crate::intercept::options::options;

/// Operations waiting when the serving thread is asked to tell them.
const CAPACITY: usize = 64;

/// Operations waiting when the thread that queues tells them itself: the serving thread
/// fell behind (or there is none that answers).
const LIMIT: usize = 4 * CAPACITY;

/// An operation waiting to be told.
enum Queued {
    /// A launch, copy or memset: its `Work`, with its accesses in [`Queue::accesses`], the
    /// phase its model update is timed as, and for a copy the host-race guard guards, the
    /// pending epoch it is guarded under ([`host_races::work_queued`]).
    Work {
        on: StreamRef,
        origin: Origin,
        kernel: Option<KernelId>,
        accesses: (u32, u32),
        host: HostEffect,
        phase: Phase,
        guarded: Option<Epoch>,
    },
    /// `cuEventRecord`: the event takes the stream's clock.
    Record { event: u64, on: StreamRef, external: bool, origin: Origin },
    /// `cuStreamWaitEvent`: the stream joins the event's clock.
    Wait { on: StreamRef, event: u64, origin: Origin },
    /// A synchronize, or a query that found the work done: the host joins what it waited for.
    Join(Join),
    /// The next launch on the stream is programmatic, its kernel's wait as given.
    Programmatic { on: StreamRef, wait: GridWait },
}

/// What the host waited for at a synchronize or a successful query.
#[derive(Clone, Copy, Debug)]
pub enum Join {
    /// `cuStreamSynchronize`, `cuStreamQuery`.
    Stream(StreamRef),
    /// `cuCtxSynchronize`: every stream of the context.
    Context(u64),
    /// `cuEventSynchronize`, `cuEventQuery`.
    Event(u64),
}

struct Queue {
    work: Vec<Queued>,
    accesses: Vec<Access>,
}

impl Queue {
    const fn new() -> Queue {
        Queue { work: Vec::new(), accesses: Vec::new() }
    }
}

/// Where calls queue their work.
static QUEUE: Mutex<Queue> = Mutex::new(Queue::new());
/// The batch being told, taken whole from [`QUEUE`]: its lock orders the batches (whoever
/// holds it takes the queue, then tells it), and its lists are kept for the next batch.
static TOLD: Mutex<Queue> = Mutex::new(Queue::new());
/// Operations queued and not yet told (in [`QUEUE`] or being told): read without a lock by
/// every settle.
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Asks the thread that serves the batch to tell it; false when it cannot be asked.
static SERVER: OnceLock<fn() -> bool> = OnceLock::new();

thread_local! {
    /// This thread is telling the model the queue's work: a race found there reaches the
    /// report sink, which asks the model, which must not settle again.
    static TELLING: Cell<bool> = const { Cell::new(false) };
    /// This thread serves the batch ([`serving`]): its settles are not the program's.
    static SERVING: Cell<bool> = const { Cell::new(false) };
    /// The batch's locks, held across a fork by the forking thread ([`before_fork`]).
    static HELD: RefCell<Option<(MutexGuard<'static, Queue>, MutexGuard<'static, Queue>)>> =
        const { RefCell::new(None) };
}

/// From now on, a full queue is told by the thread that `ask` wakes: `ask` must return
/// false when it cannot wake it, and that thread must [`settle`] when woken.
pub fn serve_by(ask: fn() -> bool) {
    let _ = SERVER.set(ask);
}

/// Called by the thread that serves the batch, before it first settles: its settles are
/// its own work, not time the program's threads spend on the batch
/// ([`Phase::ProgramSettle`]).
pub fn serving() {
    let _ = SERVING.try_with(|serving| serving.set(true));
}

/// Whether operations wait to be told (the serving thread checks before it sleeps).
pub fn waiting() -> bool {
    PENDING.load(Ordering::Relaxed) > 0
}

/// Queues `work` on `on` (a launch, memset or copy, the host waiting for it or not), whose
/// model update is timed as `phase`. Told at once when [`at_once`].
pub fn queue(model: &Model, on: StreamRef, work: Work<'_>, phase: Phase) {
    queue_work(model, on, work, phase, None);
}

/// Queues a copy whose host bytes the host-race guard guards under the epoch `pending`
/// until the model, told it, gives it its own ([`host_races::work_told`]).
pub fn queue_guarded(model: &Model, on: StreamRef, work: Work<'_>, phase: Phase, pending: Epoch) {
    queue_work(model, on, work, phase, Some(pending));
}

/// Whether work is told to the model as it is called, not queued: with `halt_on_error=1`
/// (the first race stops the program), and in a process that shares memory or events with
/// others through CUDA IPC, whose accesses and records must be published before the program
/// can tell another process about them ([`peers`]); what was queued before is told first.
#[inline]
fn at_once(model: &Model) -> bool {
    if options().halt_on_error {
        return true;
    }
    if peers::sharing() {
        settle(model);
        return true;
    }
    false
}

fn queue_work(model: &Model, on: StreamRef, work: Work<'_>, phase: Phase, guarded: Option<Epoch>) {
    if at_once(model) {
        let _timer = phases::start(phase);
        tell_work(model, on, work, guarded);
        return;
    }
    push(model, |queue| {
        let start = queue.accesses.len() as u32;
        queue.accesses.extend_from_slice(work.accesses);
        let end = queue.accesses.len() as u32;
        Queued::Work {
            on,
            origin: work.origin,
            kernel: work.kernel,
            accesses: (start, end),
            host: work.host,
            phase,
            guarded,
        }
    });
}

fn tell_work(model: &Model, on: StreamRef, work: Work<'_>, guarded: Option<Epoch>) {
    let host = work.host;
    let told = model.work(on, work);
    if host != HostEffect::None {
        peers::host_joined(model);
    }
    if let Some(pending) = guarded {
        host_races::work_told(pending, told);
    }
}

/// Queues the record of `event` on `on` (`external`: `CU_EVENT_RECORD_EXTERNAL`). Told at
/// once when [`at_once`].
pub fn record(model: &Model, event: u64, on: StreamRef, external: bool, origin: Origin) {
    if at_once(model) {
        let _timer = phases::start(Phase::EventModel);
        model.event_record(event, on, external, &origin);
        return;
    }
    push(model, |_| Queued::Record { event, on, external, origin });
}

/// Queues the mark that the next launch on `on` is programmatic, its kernel's wait `wait`.
/// Told at once when [`at_once`].
pub fn programmatic_next(model: &Model, on: StreamRef, wait: GridWait) {
    if at_once(model) {
        model.programmatic_next_launch(on, wait);
        return;
    }
    push(model, |_| Queued::Programmatic { on, wait });
}

/// Queues `on`'s wait for `event`. Told at once when [`at_once`].
pub fn wait(model: &Model, on: StreamRef, event: u64, origin: Origin) {
    if at_once(model) {
        let _timer = phases::start(Phase::EventModel);
        model.stream_wait_event(on, event, &origin);
        return;
    }
    push(model, |_| Queued::Wait { on, event, origin });
}

/// Queues the host's join of what it waited for, and has the queue told soon: the serving
/// thread is asked to (it tells it within its nap, or is woken; this thread tells it if none
/// answers), so that a race among the work the host waited for is on the disk moments after
/// the wait, as a program that goes on to a long stretch of host code (or is killed)
/// expects. Told at once when [`at_once`]; with a copy's host bytes
/// guarded, see [`guard_waits_for`].
pub fn join(model: &Model, join: Join) {
    if at_once(model) {
        tell_join(model, join);
        peers::host_joined(model);
        return;
    }
    push(model, |_| Queued::Join(join));
    if guard_waits_for(model, join) || !SERVER.get().is_some_and(|ask| ask()) {
        settle(model);
    }
}

/// Whether this thread must tell the queue now, for the host-race guard to lift what the host
/// joined as the call returns, before the host touches those bytes: a copy stays guarded
/// that only the model, told, can say whether `join` covers. A context's synchronize surely
/// covers the copies on its streams, a stream's those on it: those are lifted here (a step's
/// synchronize, with the prefetcher's copy in flight, then waits for none of the step's
/// launches to be told). An event's clock is the model's to say.
fn guard_waits_for(model: &Model, join: Join) -> bool {
    if !host_races::in_flight() {
        return false;
    }
    match join {
        Join::Context(ctx) => host_races::lift_joined(|copy| model.context_sync_joins(ctx, copy.op.epoch)),
        Join::Stream(on) => host_races::lift_joined(|copy| model.stream_sync_joins(on, copy.op.epoch)),
        Join::Event(_) => true,
    }
}

fn tell_join(model: &Model, join: Join) {
    let _timer = phases::start(Phase::EventModel);
    match join {
        Join::Stream(on) => model.stream_synchronized(on),
        Join::Context(ctx) => model.context_synchronized(ctx),
        Join::Event(event) => model.event_synchronized(event),
    }
}

/// Adds the operation `make` builds (with room in the queue's lists) to the queue, and has
/// the queue told if it is full.
fn push(model: &Model, make: impl FnOnce(&mut Queue) -> Queued) {
    let waiting = {
        let mut queue = lock(&QUEUE);
        let queued = make(&mut queue);
        queue.work.push(queued);
        PENDING.fetch_add(1, Ordering::AcqRel) + 1
    };
    let asked = waiting == CAPACITY && SERVER.get().is_some_and(|ask| ask());
    if waiting >= LIMIT || (waiting == CAPACITY && !asked) {
        settle(model);
    }
}

/// Tells the model everything queued, in order, after the batch being told. A call that
/// happened after a queued one (on any thread) sees it here: the queue's lock orders them.
/// Returns how many operations this call told.
pub fn settle(model: &Model) -> usize {
    if PENDING.load(Ordering::Acquire) == 0 || TELLING.try_with(Cell::get).unwrap_or(false) {
        return 0;
    }
    let _timer = if SERVING.try_with(Cell::get).unwrap_or(false) { None } else { phases::start(Phase::ProgramSettle) };
    let mut batch = lock(&TOLD);
    std::mem::swap(&mut *lock(&QUEUE), &mut *batch);
    tell(model, &mut batch)
}

fn tell(model: &Model, batch: &mut Queue) -> usize {
    let _ = TELLING.try_with(|telling| telling.set(true));
    let Queue { work, accesses } = batch;
    let told = work.len();
    for queued in work.drain(..) {
        match queued {
            Queued::Work { on, origin, kernel, accesses: (start, end), host, phase, guarded } => {
                let _timer = phases::start(phase);
                let accesses = &accesses[start as usize..end as usize];
                tell_work(model, on, Work { origin, kernel, accesses, host }, guarded);
            }
            Queued::Record { event, on, external, origin } => {
                let _timer = phases::start(Phase::EventModel);
                model.event_record(event, on, external, &origin);
            }
            Queued::Wait { on, event, origin } => {
                let _timer = phases::start(Phase::EventModel);
                model.stream_wait_event(on, event, &origin);
            }
            Queued::Join(join) => tell_join(model, join),
            Queued::Programmatic { on, wait } => model.programmatic_next_launch(on, wait),
        }
    }
    accesses.clear();
    PENDING.fetch_sub(told, Ordering::AcqRel);
    let _ = TELLING.try_with(|telling| telling.set(false));
    told
}

fn lock(queue: &'static Mutex<Queue>) -> MutexGuard<'static, Queue> {
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

/// Before a fork, in the forking thread: tells `model` what waits (so that the child does
/// not tell its copy of the parent's work again), and holds the batch's locks until
/// [`after_fork`], so that the child inherits none held by a thread it does not have.
pub fn before_fork(model: Option<&Model>) {
    let mut told = lock(&TOLD);
    let mut queue = lock(&QUEUE);
    if let Some(model) = model {
        std::mem::swap(&mut *queue, &mut *told);
        let _ = tell(model, &mut told);
    }
    let _ = HELD.try_with(|held| *held.borrow_mut() = Some((told, queue)));
}

/// After a fork, in the parent and in the child: the locks [`before_fork`] took, let go.
pub fn after_fork() {
    let _ = HELD.try_with(|held| held.borrow_mut().take());
}

/// Held by the tests that use the process's batch, one at a time.
#[cfg(test)]
pub static SERIAL: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    use streamsan::model::buffers::MemoryKind;
    use streamsan::model::op::{HostEffect, Mode, StackId, ThreadId};
    use streamsan::model::Alloc;

    use super::*;

    static ASKED: AtomicUsize = AtomicUsize::new(0);
    /// Whether the tests' server answers. The server, once installed, stays for the process
    /// (as the watcher does), whichever test installed it first: one that does not answer
    /// is as none.
    static ANSWERS: AtomicBool = AtomicBool::new(false);

    fn asked() -> bool {
        ASKED.fetch_add(1, Ordering::Relaxed);
        ANSWERS.load(Ordering::Relaxed)
    }

    /// The tests' server, answering or not.
    fn served(answers: bool) {
        ANSWERS.store(answers, Ordering::Relaxed);
        serve_by(asked);
    }

    fn queue_one(model: &Model) {
        let origin = Origin { api: "cuLaunchKernel", thread: ThreadId(1), site: StackId(0) };
        let work = Work { origin, kernel: None, accesses: &[], host: HostEffect::None };
        queue(model, StreamRef::Legacy { ctx: 1 }, work, Phase::Model);
    }

    #[test]
    fn a_full_queue_is_told_by_its_server_or_else_by_the_thread_that_filled_it() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let model = Model::new(Box::new(|_| None), None);
        settle(&model);
        // No thread answers for the batch: the call that fills the queue tells it.
        served(false);
        for _ in 1..CAPACITY {
            queue_one(&model);
        }
        assert!(waiting());
        queue_one(&model);
        assert!(!waiting(), "the call that filled the queue told it");
        // A server is asked once, and the queue waits for it, up to the limit.
        served(true);
        ASKED.store(0, Ordering::Relaxed);
        for _ in 0..CAPACITY {
            queue_one(&model);
        }
        assert_eq!(ASKED.load(Ordering::Relaxed), 1);
        assert!(waiting(), "the server tells a full queue");
        for _ in CAPACITY..LIMIT - 1 {
            queue_one(&model);
        }
        assert!(waiting());
        queue_one(&model);
        assert!(!waiting(), "the call that found the limit told the queue");
        assert_eq!(ASKED.load(Ordering::Relaxed), 1);
    }

    /// The origin of the copies the tests below queue.
    const COPY: Origin = Origin { api: "cuMemcpyHtoDAsync_v2", thread: ThreadId(1), site: StackId(0) };

    /// A model, its batch empty, with the two streams `handles` (context 1) and a 64-byte
    /// device buffer at `base`.
    fn two_streams_and_a_buffer(handles: [u64; 2], base: u64) -> Model {
        let model = Model::new(Box::new(|_| None), None);
        settle(&model);
        for handle in handles {
            model.stream_created(handle, 1, true, &COPY);
        }
        model.alloc(Alloc { base, size: 64, kind: MemoryKind::Device, ctx: 1 }, None, &COPY);
        model
    }

    /// Queues a copy on `on` that writes the 64 bytes at `base`.
    fn queue_write(model: &Model, on: StreamRef, base: u64) {
        let accesses = [Access::new(base, 64, Mode::Write)];
        queue(
            model,
            on,
            Work { origin: COPY, kernel: None, accesses: &accesses, host: HostEffect::None },
            Phase::CopyModel,
        );
    }

    /// The count of the phase table's row for the batch told on program threads.
    fn program_settles() -> u64 {
        let table = phases::table();
        let row = table.lines().find_map(|line| line.trim_start().strip_prefix("batch told on program threads"));
        row.and_then(|rest| rest.split_whitespace().next()).expect("the row").parse().expect("a count")
    }

    #[test]
    fn a_settle_is_the_programs_unless_the_thread_serving_the_batch_makes_it() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        phases::enable();
        let model: &'static Model = Box::leak(Box::new(Model::new(Box::new(|_| None), None)));
        settle(model);
        let before = program_settles();
        settle(model);
        assert_eq!(program_settles(), before, "nothing waited");
        queue_one(model);
        settle(model);
        assert_eq!(program_settles(), before + 1, "this thread told the batch");
        queue_one(model);
        std::thread::spawn(|| {
            serving();
            settle(model);
        })
        .join()
        .unwrap();
        assert!(!waiting());
        assert_eq!(program_settles(), before + 1, "the serving thread told it");
    }

    /// A copy on one stream, the host's synchronize with it, and a copy on another stream:
    /// queued, the join is told between them, and orders the second copy after the first
    /// (the host issued it after it waited); without the join, the race.
    #[test]
    fn the_hosts_join_queues_with_the_work_around_it_in_order() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // A server that answers: the join asks it, and the queue waits for it.
        served(true);
        let (first, second) = (StreamRef::Handle(0x61), StreamRef::Handle(0x62));
        let copy = |model: &Model, on: StreamRef| queue_write(model, on, 0x2000);
        for joins in [Some(Join::Stream(first)), Some(Join::Context(1)), Some(Join::Event(0xe)), None] {
            let model = two_streams_and_a_buffer([0x61, 0x62], 0x2000);
            copy(&model, first);
            if let Some(joined) = joins {
                if let Join::Event(event) = joined {
                    record(&model, event, first, false, COPY);
                }
                join(&model, joined);
                assert!(waiting(), "the join asked the server, and waits for it");
            }
            copy(&model, second);
            assert!(waiting() && model.races().is_empty(), "queued, not yet told");
            settle(&model);
            assert_eq!(model.races().len(), usize::from(joins.is_none()), "{joins:?}");
        }
    }

    /// A copy on one stream, a record there, a wait for it on another and a copy there,
    /// queued: told in order, the wait orders the second copy; without it, the race is found
    /// when the queue is told, and not before.
    #[test]
    fn records_and_waits_queue_with_the_work_around_them_in_order() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (first, second) = (StreamRef::Handle(0x51), StreamRef::Handle(0x52));
        let copy = |model: &Model, on: StreamRef| queue_write(model, on, 0x1000);
        for waits in [true, false] {
            let model = two_streams_and_a_buffer([0x51, 0x52], 0x1000);
            copy(&model, first);
            record(&model, 0xe, first, false, COPY);
            if waits {
                wait(&model, second, 0xe, COPY);
            }
            copy(&model, second);
            assert!(waiting() && model.races().is_empty(), "queued, not yet told");
            settle(&model);
            assert_eq!(model.races().len(), usize::from(!waits), "waits: {waits}");
        }
    }
}
