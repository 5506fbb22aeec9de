//! The host half of the engine: subscription, twins patched as they load, one table per
//! measured launch, and reading tables back once the caller says their launches completed.
//! Nothing here synchronizes a program's stream, and a callback never calls the driver.

use core::ffi::c_void;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::api::{self, Api, Handle};
use crate::loads::{self, Load};
use crate::patch;
use crate::table::{self, Measured, EARLY_AT, EARLY_TAG, TABLE_BYTES, WIDE_TABLE_BYTES, WIDE_TAG};
use crate::twins::{self, FirstWait, NoTwin, Pair, Twins};
use crate::variables;

/// Tables allocated at once, per context.
const TABLES_PER_CHUNK: usize = 128;
/// Tables at most per context: when all are waiting to be read, launches go unmeasured.
const MAX_TABLES: usize = 4096;
/// Wide tables ([`table::WIDE_ENTRIES`]) allocated at once, and at most, per context: when
/// none is free, a launch that would take one takes a table of the common size.
const WIDE_PER_CHUNK: usize = 8;
const MAX_WIDE_TABLES: usize = 64;

/// Real driver functions the engine calls for itself, never the shim's hooks.
#[derive(Clone, Copy)]
pub struct Driver {
    pub dlsym: api::Dlsym,
    pub ctx_get_current: unsafe extern "C" fn(*mut Handle) -> u32,
    pub stream_is_capturing: unsafe extern "C" fn(Handle, *mut u32) -> u32,
    pub twins: crate::driver::Driver,
}

/// A measured launch, to be read once it completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A measured launch's table: its context, where it lies, whether it is wide (and whether
/// the launch wanted one), whether its header holds the early range, the twin's function it
/// was bound to, and the launch's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    ctx: usize,
    table: usize,
    wide: bool,
    wanted_wide: bool,
    wait_known: bool,
    twin: usize,
    threads: u64,
}

impl Held {
    fn bytes(&self) -> usize {
        table::table_bytes(self.wide)
    }
}

/// The tables of one context.
#[derive(Default)]
struct Pool {
    free: Vec<usize>,
    allocated: usize,
    wide_free: Vec<usize>,
    wide_allocated: usize,
    /// The engine's own stream (`CU_STREAM_NON_BLOCKING`) and its sanitizer handle.
    stream: Option<Handle>,
    /// The kernel that copies module variables into and out of twins ([`variables`]).
    copier: Option<Handle>,
}

impl Pool {
    /// Frees a table once read (or never written).
    fn give_back(&mut self, held: &Held) {
        if held.wide {
            self.wide_free.push(held.table);
        } else {
            self.free.push(held.table);
        }
    }
}

pub(crate) struct Engine {
    pub(crate) api: Api,
    pub(crate) driver: Driver,
    pools: Mutex<HashMap<usize, Pool>>,
    /// Contexts the patch was added to.
    patched: Mutex<Vec<usize>>,
    /// Held around every call that adds the patch or patches a module: the API asks its
    /// callers to serialize them.
    patching: Mutex<()>,
    pub(crate) twins: Mutex<Twins>,
    /// Held from binding a table to a twin's function to the launch's real call: the binding
    /// holds for every later launch of that function ([`arm`]).
    pub(crate) measuring: Mutex<()>,
    /// Measured launches by ticket, until their tables are read.
    tickets: Mutex<HashMap<u64, Held>>,
    /// Twins' functions one of whose launches filled its table, with the fewest threads such
    /// a launch had: their launches of as many threads or more take wide tables. A launch's
    /// footprint grows with its grid: an elementwise kernel's launches over small tensors
    /// need none, though one over an embedding filled a table.
    wide: Mutex<HashMap<usize, u64>>,
    next_ticket: AtomicU64,
    /// Launches given a table, of them given a wide one; those that found none free; tables
    /// whose patch found no entry for some granule, of them wide ones and common ones of
    /// launches that wanted a wide one, none being free; twin launches the driver refused.
    measured: AtomicU64,
    measured_wide: AtomicU64,
    unmeasured: AtomicU64,
    overflowed: AtomicU64,
    overflowed_wide: AtomicU64,
    overflowed_wanting_wide: AtomicU64,
    pub(crate) refused: AtomicU64,
    /// Nanoseconds spent loading twins and reading tables back (copies, resets and the wait
    /// for them).
    pub(crate) twins_ns: AtomicU64,
    reading_ns: AtomicU64,
    /// Nanoseconds arming launches (twin, table, attributes, variables, binding), of them
    /// binding tables (with the early range's copy, waited for); copying variables, before
    /// and after the launches, of it after them; the variables copied, the copier's launches
    /// and the driver's copies that copied them.
    arming_ns: AtomicU64,
    binding_ns: AtomicU64,
    mirroring_ns: AtomicU64,
    mirroring_back_ns: AtomicU64,
    variable_copies: AtomicU64,
    copier_launches: AtomicU64,
    driver_copies: AtomicU64,
}

// SAFETY: the handles are the driver's, valid on any thread.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

pub(crate) static ENGINE: OnceLock<Engine> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);

/// Why a launch to measure was not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmeasured {
    /// Every table was waiting to be read.
    NoTable,
    /// Its kernel has no twin to run on.
    NoTwin(NoTwin),
    /// The driver refused the twin's launch: the program's own function was launched.
    Refused,
    /// Allocating tables or loading code now could deadlock or break the program's capture
    /// (the caller said so): it is measured at a later launch.
    NotNow,
}

/// What became of the launch this thread made last ([`outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not measured, with nothing to note: its stream captures (it became a graph's node),
    /// or no context is current.
    Skipped,
    Measured(Ticket),
    Unmeasured(Unmeasured),
}

/// A launch sent to a twin, between [`arm`] and [`outcome`]: its ticket, the program's
/// function, context and stream it stands for, and the twin.
struct Armed {
    ticket: Ticket,
    function: Handle,
    ctx: Handle,
    stream: Handle,
    pair: Pair,
    _measuring: MutexGuard<'static, ()>,
}

thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
    static LAST: std::cell::Cell<Outcome> = const { std::cell::Cell::new(Outcome::Skipped) };
}

/// Why the engine is not running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// No library, or one without the functions.
    NoLibrary(String),
    /// Another subscriber holds the API: the program runs under compute-sanitizer.
    OtherSubscriber,
    /// The API refused to start (an unsupported driver or GPU), with its status.
    Refused(u32),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoLibrary(why) => write!(f, "the Compute Sanitizer library is not available ({why})"),
            Unavailable::OtherSubscriber => f.write_str(
                "another tool holds the Compute Sanitizer API (streamsan cannot run under compute-sanitizer: only one subscriber may exist per process)",
            ),
            Unavailable::Refused(status) => write!(f, "the Compute Sanitizer API refused to start (status {status})"),
        }
    }
}

/// Loads the API and subscribes to module loads. Call before the program's first driver
/// call (the shim's constructor), once; later calls return the first answer.
pub fn start(driver: Driver) -> Result<(), Unavailable> {
    if STARTED.swap(true, Ordering::AcqRel) {
        return if ENGINE.get().is_some() { Ok(()) } else { Err(Unavailable::Refused(u32::MAX)) };
    }
    let api = api::load(driver.dlsym).map_err(Unavailable::NoLibrary)?;
    let mut subscriber: Handle = core::ptr::null_mut();
    // SAFETY: valid out-pointer and callback.
    let status = unsafe { (api.subscribe)(&mut subscriber, callback, core::ptr::null_mut()) };
    match status {
        api::SANITIZER_SUCCESS => {}
        api::SANITIZER_ERROR_MAX_LIMIT_REACHED => return Err(Unavailable::OtherSubscriber),
        other => return Err(Unavailable::Refused(other)),
    }
    // Only module loads: a launch's table is bound before it ([`arm`]), so no callback
    // runs at launches.
    // SAFETY: the subscriber just made.
    let status = unsafe { (api.enable_domain)(1, subscriber, api::DOMAIN_RESOURCE) };
    if status != api::SANITIZER_SUCCESS {
        return Err(Unavailable::Refused(status));
    }
    let engine = Engine {
        api,
        driver,
        pools: Mutex::new(HashMap::new()),
        patched: Mutex::new(Vec::new()),
        patching: Mutex::new(()),
        twins: Mutex::new(Twins::default()),
        measuring: Mutex::new(()),
        tickets: Mutex::new(HashMap::new()),
        wide: Mutex::new(HashMap::new()),
        next_ticket: AtomicU64::new(1),
        measured: AtomicU64::new(0),
        measured_wide: AtomicU64::new(0),
        unmeasured: AtomicU64::new(0),
        overflowed: AtomicU64::new(0),
        overflowed_wide: AtomicU64::new(0),
        overflowed_wanting_wide: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        twins_ns: AtomicU64::new(0),
        reading_ns: AtomicU64::new(0),
        arming_ns: AtomicU64::new(0),
        binding_ns: AtomicU64::new(0),
        mirroring_ns: AtomicU64::new(0),
        mirroring_back_ns: AtomicU64::new(0),
        variable_copies: AtomicU64::new(0),
        copier_launches: AtomicU64::new(0),
        driver_copies: AtomicU64::new(0),
    };
    let _ = ENGINE.set(engine);
    Ok(())
}

impl Engine {
    pub(crate) fn twins(&self) -> MutexGuard<'_, Twins> {
        self.twins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`variables::copy`] for a launch in `ctx`, counted: whether every variable was copied.
    pub(crate) fn mirror(&self, ctx: Handle, pair: &twins::Pair, stream: Handle, into_twin: bool) -> bool {
        if pair.variables.is_empty() {
            return true;
        }
        let started = Instant::now();
        let copier = self.pools.lock().unwrap_or_else(|e| e.into_inner()).get(&(ctx as usize)).and_then(|p| p.copier);
        let copied = variables::copy(&self.driver.twins, copier, &pair.variables, stream, into_twin);
        let ns = started.elapsed().as_nanos() as u64;
        self.mirroring_ns.fetch_add(ns, Ordering::Relaxed);
        if !into_twin {
            self.mirroring_back_ns.fetch_add(ns, Ordering::Relaxed);
        }
        let c = copied.unwrap_or_default();
        self.variable_copies.fetch_add(c.variables, Ordering::Relaxed);
        self.copier_launches.fetch_add(c.launches, Ordering::Relaxed);
        self.driver_copies.fetch_add(c.driver_copies, Ordering::Relaxed);
        copied.is_some()
    }
}

/// Before the real call of a launch to measure, of `function` (the program's handle: a
/// `CUfunction` or a `CUkernel`) on `stream` with `threads` (its grid's blocks times their
/// threads), outside any callback. Returns its twin's function with a table bound to it, to be
/// launched instead with the same arguments, or `function` where it cannot be measured.
/// `may_load`: the engine may load code and allocate now (no device work waits for the host,
/// which a load waiting for the device to drain would deadlock on, and no capture forbids such
/// calls). [`outcome`] must follow the real call.
pub fn arm(function: *mut c_void, stream: *mut c_void, threads: u64, may_load: bool) -> *mut c_void {
    let Some(engine) = ENGINE.get() else { return function };
    let retired = std::mem::take(&mut engine.twins().retired);
    if !retired.is_empty() {
        twins::unload(&engine.driver.twins, retired);
    }
    let started = Instant::now();
    let measured = measure(engine, function, stream, threads, may_load);
    engine.arming_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let (launch, last) = match measured {
        Ok(Some(armed)) => {
            let twin = armed.pair.twin;
            let _ = ARMED.try_with(|a| *a.borrow_mut() = Some(armed));
            (twin, Outcome::Skipped)
        }
        Ok(None) => (function, Outcome::Skipped),
        Err(why) => (function, Outcome::Unmeasured(why)),
    };
    let _ = LAST.try_with(|l| l.set(last));
    launch
}

/// Makes a launch of `function` on `stream` measured: its twin, a table, the binding.
/// Ok(None): it is not to be measured (its stream captures, or there is no context).
fn measure(
    engine: &'static Engine,
    function: Handle,
    stream: Handle,
    threads: u64,
    may_load: bool,
) -> Result<Option<Armed>, Unmeasured> {
    let mut capturing = 0u32;
    // SAFETY: a real driver function and a valid out-pointer. A captured launch becomes a
    // graph's node, which runs at every launch of the graph: it keeps the program's code.
    if unsafe { (engine.driver.stream_is_capturing)(stream, &mut capturing) } != 0 || capturing != 0 {
        return Ok(None);
    }
    let mut ctx: Handle = core::ptr::null_mut();
    // SAFETY: a real driver function and a valid out-pointer.
    if unsafe { (engine.driver.ctx_get_current)(&mut ctx) } != 0 || ctx.is_null() {
        return Ok(None);
    }
    let started = Instant::now();
    let pair = twins::pair(&engine.driver.twins, &engine.twins, function, ctx, may_load).map_err(Unmeasured::NoTwin);
    engine.twins_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let pair = pair?;
    twins::copy_attributes(&engine.driver.twins, &pair);
    let wide = engine.wants_wide(&pair, threads);
    if !prepare(engine, ctx, wide, may_load)? {
        return Err(Unmeasured::NoTable);
    }
    let measuring = engine.measuring.lock().unwrap_or_else(|e| e.into_inner());
    let ticket = engine.launch_table(ctx, &pair, wide, threads).ok_or(Unmeasured::NoTable)?;
    if !engine.mirror(ctx, &pair, stream, true) {
        discard(ticket);
        return Err(Unmeasured::NoTwin(NoTwin::ModuleState));
    }
    engine.bind(&pair, ticket);
    Ok(Some(Armed { ticket, function, ctx, stream, pair, _measuring: measuring }))
}

/// After the real call of the launch [`arm`] made ready, with whether the driver accepted
/// it: what became of it. A twin's launch the driver refused ran nothing and is
/// `Unmeasured(Refused)`: the caller then makes the program's own launch.
pub fn outcome(accepted: bool) -> Outcome {
    let armed = ARMED.try_with(|a| a.borrow_mut().take()).ok().flatten();
    let last = LAST.try_with(|l| l.replace(Outcome::Skipped)).unwrap_or(Outcome::Skipped);
    let Some(armed) = armed else { return last };
    let Armed { ticket, function, ctx, stream, pair, _measuring } = armed;
    let Some(engine) = ENGINE.get() else { return Outcome::Skipped };
    if accepted {
        engine.mirror(ctx, &pair, stream, false);
        drop(_measuring);
        twins::launched(&mut engine.twins(), function, ctx);
        return Outcome::Measured(ticket);
    }
    drop(_measuring);
    engine.refused.fetch_add(1, Ordering::Relaxed);
    discard(ticket);
    Outcome::Unmeasured(Unmeasured::Refused)
}

/// What the engine did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Launches given a table, and of them given a wide one (a launch of their kernel as
    /// large or smaller filled a table before).
    pub measured: u64,
    pub wide: u64,
    /// Launches to measure that found no table free.
    pub no_table: u64,
    /// Tables that overflowed; of them wide ones, and common ones of launches that wanted a
    /// wide one (none was free).
    pub overflowed: u64,
    pub overflowed_wide: u64,
    pub overflowed_wanting_wide: u64,
    /// Twin launches the driver refused.
    pub refused: u64,
    /// Twins loaded, those among them whose module's variables are mirrored; modules left
    /// without one: state with no name, or no code to load.
    pub twins: u64,
    pub mirrored: u64,
    pub with_state: u64,
    pub without_code: u64,
    /// Time spent making twins and reading tables back, in microseconds.
    pub twins_us: u64,
    pub reading_us: u64,
    /// Time arming launches, of it binding tables; copying module variables before and after
    /// launches, of it after them, in microseconds; the variables copied, by how many
    /// launches of the copier and copies of the driver's.
    pub arming_us: u64,
    pub binding_us: u64,
    pub mirroring_us: u64,
    pub mirroring_back_us: u64,
    pub variable_copies: u64,
    pub copier_launches: u64,
    pub driver_copies: u64,
}

/// Whether the program's function (or `CUkernel`) `function` waits on its grid dependencies
/// somewhere in its code (`griddepcontrol.wait`): None when the engine is not running, or
/// its module's code was not seen or cannot be read.
pub fn waits_for_grid(function: *mut c_void) -> Option<bool> {
    let engine = ENGINE.get()?;
    twins::waits_for_grid(&engine.driver.twins, &engine.twins, function.cast())
}

/// What the engine did so far.
pub fn counters() -> Counters {
    ENGINE.get().map_or(Counters::default(), |e| {
        let c = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let t = e.twins();
        Counters {
            measured: c(&e.measured),
            wide: c(&e.measured_wide),
            no_table: c(&e.unmeasured),
            overflowed: c(&e.overflowed),
            overflowed_wide: c(&e.overflowed_wide),
            overflowed_wanting_wide: c(&e.overflowed_wanting_wide),
            refused: c(&e.refused),
            twins: t.loaded,
            mirrored: t.mirrored,
            with_state: t.with_state,
            without_code: t.without_code,
            twins_us: c(&e.twins_ns) / 1000,
            reading_us: c(&e.reading_ns) / 1000,
            arming_us: c(&e.arming_ns) / 1000,
            binding_us: c(&e.binding_ns) / 1000,
            mirroring_us: c(&e.mirroring_ns) / 1000,
            mirroring_back_us: c(&e.mirroring_back_ns) / 1000,
            variable_copies: c(&e.variable_copies),
            copier_launches: c(&e.copier_launches),
            driver_copies: c(&e.driver_copies),
        }
    })
}

unsafe extern "C" fn callback(_: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let Some(engine) = ENGINE.get() else { return };
    match (domain, cbid) {
        (api::DOMAIN_RESOURCE, api::CBID_RESOURCE_MODULE_LOADED) => {
            // SAFETY: the data of this callback.
            let data = unsafe { &*(data as *const api::ModuleData) };
            match loads::current() {
                Load::Twin => engine.patch_twin(data.context, data.module),
                Load::Copier => {}
                Load::Program if !data.cubin.is_null() => {
                    // SAFETY: the driver's code of the module, `cubin_size` bytes, live during
                    // the callback.
                    let code = unsafe { core::slice::from_raw_parts(data.cubin.cast::<u8>(), data.cubin_size) };
                    engine.twins().loaded(data.context, data.module, code);
                }
                Load::Program => {}
            }
        }
        (api::DOMAIN_RESOURCE, api::CBID_RESOURCE_MODULE_UNLOAD_STARTING) => {
            let data = unsafe { &*(data as *const api::ModuleData) };
            engine.twins().forget(data.module);
        }
        (api::DOMAIN_RESOURCE, api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING) => {
            let data = unsafe { &*(data as *const api::ContextData) };
            let ctx = data.context as usize;
            engine.pools.lock().unwrap_or_else(|e| e.into_inner()).remove(&ctx);
            engine.patched.lock().unwrap_or_else(|e| e.into_inner()).retain(|&c| c != ctx);
            engine.tickets.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, held| held.ctx != ctx);
            engine.twins().context_destroyed(data.context);
        }
        _ => {}
    }
}

impl Engine {
    /// Patches a twin as it loads, adding the patch to its context first if needed.
    fn patch_twin(&self, ctx: Handle, module: Handle) {
        let _held = self.patching.lock().unwrap_or_else(|e| e.into_inner());
        let mut patched = self.patched.lock().unwrap_or_else(|e| e.into_inner());
        if !patched.contains(&(ctx as usize)) {
            // SAFETY: the patch image lives for the process.
            if unsafe { (self.api.add_patches)(patch::IMAGE.as_ptr().cast(), ctx) } != api::SANITIZER_SUCCESS {
                return;
            }
            patched.push(ctx as usize);
        }
        // SAFETY: a module the driver is loading; patching calls serialized.
        unsafe {
            patch::instruct(&self.api, module);
            (self.api.patch_module)(module);
        }
    }

    /// Whether a launch of `threads` of the twin's function of `pair` takes a wide table: a
    /// launch of it of as many threads or fewer filled a table.
    pub(crate) fn wants_wide(&self, pair: &Pair, threads: u64) -> bool {
        self.wide.lock().unwrap_or_else(|e| e.into_inner()).get(&(pair.twin as usize)).is_some_and(|&t| threads >= t)
    }

    /// A free table of `ctx` for a launch of `threads` of `pair`'s twin (wide if it wants
    /// one, [`Engine::wants_wide`], and one is free), and its ticket; None when none is free.
    /// Calls no driver function: [`prepare`] filled the pool.
    pub(crate) fn launch_table(&self, ctx: Handle, pair: &Pair, want_wide: bool, threads: u64) -> Option<Ticket> {
        let (table, wide) = {
            let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
            let pool = pools.get_mut(&(ctx as usize))?;
            match want_wide.then(|| pool.wide_free.pop()).flatten() {
                Some(table) => (table, true),
                None => (pool.free.pop()?, false),
            }
        };
        let ticket = Ticket(self.next_ticket.fetch_add(1, Ordering::Relaxed));
        self.measured.fetch_add(1, Ordering::Relaxed);
        if wide {
            self.measured_wide.fetch_add(1, Ordering::Relaxed);
        }
        let held = Held {
            ctx: ctx as usize,
            table,
            wide,
            wanted_wide: want_wide,
            wait_known: false,
            twin: pair.twin as usize,
            threads,
        };
        self.tickets.lock().unwrap_or_else(|e| e.into_inner()).insert(ticket.0, held);
        Some(ticket)
    }

    /// Binds `ticket`'s table to the twin's function of `pair`, for its next launch. Where
    /// the kernel's first grid-dependency wait is known, the table's header is first given
    /// the program counters before it, and the pointer bound carries [`EARLY_TAG`]: the patch
    /// marks what those instructions touch as early. A wide table's pointer carries
    /// [`WIDE_TAG`].
    pub(crate) fn bind(&self, pair: &Pair, ticket: Ticket) {
        let started = Instant::now();
        self.bind_table(pair, ticket);
        self.binding_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// [`Engine::bind`]'s work, timed there.
    fn bind_table(&self, pair: &Pair, ticket: Ticket) {
        let Some(held) = self.tickets.lock().unwrap_or_else(|e| e.into_inner()).get(&ticket.0).copied() else {
            return;
        };
        let early = pair.first_wait.as_ref().and_then(|wait| self.early_range(wait));
        let tagged = early.is_some_and(|(lo, hi)| self.write_early(held.ctx as Handle, held.table, lo, hi));
        if tagged {
            if let Some(held) = self.tickets.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&ticket.0) {
                held.wait_known = true;
            }
        }
        let data = held.table | if tagged { EARLY_TAG } else { 0 } | if held.wide { WIDE_TAG } else { 0 };
        // SAFETY: the twin's function and a table of its context.
        unsafe { (self.api.set_callback_data)(pair.twin, data as *const c_void) };
    }

    /// `[first instruction, first wait)` of the twin's function `wait` names, in the program
    /// counters the patch is given: the API's start of the function plus the wait's offset
    /// in the code (patching leaves the function's own instructions where they are). None
    /// where the API does not find the function, or the offset lies past its end.
    fn early_range(&self, wait: &FirstWait) -> Option<(u64, u64)> {
        let (mut start, mut size) = (0u64, 0u64);
        // SAFETY: a module the engine loaded and holds, a NUL-terminated name, valid
        // out-pointers.
        let found =
            unsafe { (self.api.get_function_pc_and_size)(wait.module, wait.name.as_ptr(), &mut start, &mut size) };
        let offset = u64::from(wait.offset);
        (found == api::SANITIZER_SUCCESS && start != 0 && offset < size).then_some((start, start + offset))
    }

    /// Writes the early range `[lo, hi)` into the header of `table` (of `ctx`), and waits for
    /// the copy on the engine's own stream (it holds only that), so that the launch that
    /// follows on the program's stream finds it. Whether it was written.
    fn write_early(&self, ctx: Handle, table: usize, lo: u64, hi: u64) -> bool {
        let stream = self.pools.lock().unwrap_or_else(|e| e.into_inner()).get(&(ctx as usize)).and_then(|p| p.stream);
        let Some(stream) = stream else { return false };
        let mut header = table::early_header(lo, hi);
        // SAFETY: the API's functions, on the engine's own stream, into a table of its
        // context; the copy is waited for while `header` lives.
        unsafe {
            (self.api.memcpy_host_to_device_async)(
                (table + EARLY_AT) as *mut c_void,
                header.as_mut_ptr().cast(),
                header.len(),
                stream,
            ) == api::SANITIZER_SUCCESS
                && (self.api.stream_synchronize)(stream) == api::SANITIZER_SUCCESS
        }
    }

    /// Allocates a chunk of zeroed tables, wide or not. The zeroing is ordered before their
    /// first use by a synchronization of the engine's own stream (it holds only this memset).
    fn grow(&self, ctx: Handle, pool: &mut Pool, wide: bool) {
        let Some(stream) = pool.stream else { return };
        let (count, size) = if wide { (WIDE_PER_CHUNK, WIDE_TABLE_BYTES) } else { (TABLES_PER_CHUNK, TABLE_BYTES) };
        let bytes = count * size;
        let mut chunk: *mut c_void = core::ptr::null_mut();
        // SAFETY: the API's functions, on the engine's own stream and memory.
        unsafe {
            if (self.api.alloc)(ctx, &mut chunk, bytes) != api::SANITIZER_SUCCESS || chunk.is_null() {
                return;
            }
            if (self.api.memset)(chunk, 0, bytes, stream) != api::SANITIZER_SUCCESS
                || (self.api.stream_synchronize)(stream) != api::SANITIZER_SUCCESS
            {
                return;
            }
        }
        let tables = (0..count).rev().map(|i| chunk as usize + i * size);
        if wide {
            pool.wide_allocated += count;
            pool.wide_free.extend(tables);
        } else {
            pool.allocated += count;
            pool.free.extend(tables);
        }
    }
}

/// Before a launch to be measured, outside any callback: makes sure `ctx` has the engine's
/// stream and a free table (and a wide one if the launch `wants_wide` and more may be made),
/// making them only if `may_allocate`. Ok(false): the engine's stream cannot be made; Err:
/// every table is waiting to be read, or none may be made now.
pub(crate) fn prepare(engine: &Engine, ctx: Handle, wants_wide: bool, may_allocate: bool) -> Result<bool, Unmeasured> {
    let mut pools = engine.pools.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pools.entry(ctx as usize).or_default();
    if may_allocate && wants_wide && pool.wide_free.is_empty() && pool.wide_allocated < MAX_WIDE_TABLES {
        engine.grow(ctx, pool, true);
    }
    if !pool.free.is_empty() || !pool.wide_free.is_empty() && wants_wide {
        return Ok(true);
    }
    if !may_allocate {
        return Err(Unmeasured::NotNow);
    }
    if pool.stream.is_none() {
        let mut stream: Handle = core::ptr::null_mut();
        let mut handle: Handle = core::ptr::null_mut();
        // SAFETY: real driver functions; CU_STREAM_NON_BLOCKING: it waits on no stream.
        if unsafe { (engine.driver.twins.stream_create)(&mut stream, 1) } != 0
            || unsafe { (engine.api.get_stream_handle)(ctx, stream, &mut handle) } != api::SANITIZER_SUCCESS
        {
            return Ok(false);
        }
        pool.stream = Some(handle);
        pool.copier = variables::load_copier(&engine.driver.twins);
    }
    if pool.allocated < MAX_TABLES {
        engine.grow(ctx, pool, false);
    }
    if pool.free.is_empty() {
        engine.unmeasured.fetch_add(1, Ordering::Relaxed);
        return Err(Unmeasured::NoTable);
    }
    Ok(true)
}

/// Gives back the table of a launch that will not run as measured (it was captured into a
/// graph instead): nothing was written to it.
pub fn discard(ticket: Ticket) {
    let Some(engine) = ENGINE.get() else { return };
    let taken = engine.tickets.lock().unwrap_or_else(|e| e.into_inner()).remove(&ticket.0);
    if let Some(held) = taken {
        if let Some(pool) = engine.pools.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&held.ctx) {
            pool.give_back(&held);
        }
    }
}

/// Reads the tables of `tickets`, whose launches the caller knows completed, and hands each
/// footprint to `found` (None: the table could not be read), in ticket order (the order of
/// the launches: the model checks a launch read after those issued before it at least cost).
/// The tables are zeroed and free again afterwards. A ticket the engine does not hold (read
/// already by another thread, or its context destroyed) is skipped.
pub fn collect(tickets: &[Ticket], mut found: impl FnMut(Ticket, Option<Measured>)) {
    let Some(engine) = ENGINE.get() else { return };
    let mut taken: Vec<(Held, Ticket)> = {
        let mut map = engine.tickets.lock().unwrap_or_else(|e| e.into_inner());
        tickets.iter().filter_map(|&t| map.remove(&t.0).map(|held| (held, t))).collect()
    };
    // Adjacent tables of one context and size are read and zeroed with one copy and one
    // memset.
    taken.sort_unstable();
    let mut read_out: Vec<(Ticket, Option<Measured>)> = Vec::with_capacity(taken.len());
    let started = Instant::now();
    let mut overflowed: Vec<(usize, u64)> = Vec::new();
    let mut i = 0;
    let mut host = Vec::new();
    while i < taken.len() {
        let first = taken[i].0;
        let size = first.bytes();
        let mut j = i + 1;
        while j < taken.len()
            && (taken[j].0.ctx, taken[j].0.wide, taken[j].0.table)
                == (first.ctx, first.wide, taken[j - 1].0.table + size)
        {
            j += 1;
        }
        let run = &taken[i..j];
        let bytes = run.len() * size;
        // The pools stay unlocked while the device copies: other threads arm launches meanwhile.
        let stream = engine.pools.lock().unwrap_or_else(|e| e.into_inner()).get(&first.ctx).and_then(|p| p.stream);
        host.resize(bytes, 0u8);
        // SAFETY: the API's functions on the engine's own stream, over tables of its context
        // whose launches completed, into `bytes` of host memory; the memset is waited for
        // before the tables are free again.
        let read = stream.is_some_and(|s| unsafe {
            (engine.api.memcpy_device_to_host)(host.as_mut_ptr().cast(), first.table as *mut c_void, bytes, s)
                == api::SANITIZER_SUCCESS
                && (engine.api.memset)(first.table as *mut c_void, 0, bytes, s) == api::SANITIZER_SUCCESS
                && (engine.api.stream_synchronize)(s) == api::SANITIZER_SUCCESS
        });
        for (k, (held, ticket)) in run.iter().enumerate() {
            let measured = read.then(|| table::read(&host[k * size..(k + 1) * size], held.wait_known));
            if measured.as_ref().is_some_and(|m| !m.covers.is_empty()) {
                engine.overflowed.fetch_add(1, Ordering::Relaxed);
                if held.wide {
                    engine.overflowed_wide.fetch_add(1, Ordering::Relaxed);
                } else if held.wanted_wide {
                    engine.overflowed_wanting_wide.fetch_add(1, Ordering::Relaxed);
                }
                overflowed.push((held.twin, held.threads));
            }
            read_out.push((*ticket, measured));
        }
        if read {
            if let Some(pool) = engine.pools.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&first.ctx) {
                run.iter().for_each(|(held, _)| pool.give_back(held));
            }
        }
        i = j;
    }
    let mut wide = engine.wide.lock().unwrap_or_else(|e| e.into_inner());
    for (twin, threads) in overflowed {
        wide.entry(twin).and_modify(|t| *t = (*t).min(threads)).or_insert(threads);
    }
    drop(wide);
    engine.reading_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    read_out.sort_unstable_by_key(|&(ticket, _)| ticket);
    for (ticket, measured) in read_out {
        found(ticket, measured);
    }
}
