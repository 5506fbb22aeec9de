//! The host half of the engine: subscription, patching, one table per measured launch, and
//! reading tables back once the caller says their launches completed. Nothing here
//! synchronizes a program's stream, and a callback never calls the driver.

use core::ffi::c_void;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::api::{self, Api, Handle};
use crate::patch;
use crate::table::{self, Measured, TABLE_BYTES};

/// Tables allocated at once, per context.
const TABLES_PER_CHUNK: usize = 128;
/// Tables at most per context: when all are waiting to be read, launches go unmeasured.
const MAX_TABLES: usize = 4096;
/// Times a module unpatched may be patched again.
pub const REPATCHES: u32 = 4;
/// Of those, the ones a new key of a kernel learnt before may ask for (the rest are kept for
/// kernels nothing was learnt of).
pub const REPATCHES_FOR_NEW_KEYS: u32 = 2;

/// Real driver functions the engine calls for itself, never the shim's hooks.
#[derive(Clone, Copy)]
pub struct Driver {
    pub dlsym: api::Dlsym,
    pub ctx_get_current: unsafe extern "C" fn(*mut Handle) -> u32,
    pub stream_create: unsafe extern "C" fn(*mut Handle, u32) -> u32,
    /// `cuFuncGetModule`, where the driver has it: a function's module before its first
    /// launch (else the launch's callback tells it).
    pub func_get_module: Option<unsafe extern "C" fn(*mut Handle, Handle) -> u32>,
}

/// A measured launch, to be read once it completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// The tables of one context.
#[derive(Default)]
struct Pool {
    free: Vec<usize>,
    allocated: usize,
    /// The engine's own stream (`CU_STREAM_NON_BLOCKING`) and its sanitizer handle.
    stream: Option<Handle>,
}

struct Engine {
    api: Api,
    driver: Driver,
    pools: Mutex<HashMap<usize, Pool>>,
    /// Contexts the patch was added to.
    patched: Mutex<Vec<usize>>,
    /// Held around every call that adds the patch or patches or unpatches a module: the API
    /// asks its callers to serialize them ([`Engine::serialized`]).
    patching: Mutex<()>,
    /// Modules' patching, and which module each launched function is in.
    modules: Mutex<Modules>,
    /// Modules to patch again or to unpatch, outside callbacks ([`maintain`]).
    changes: Mutex<Vec<(usize, bool)>>,
    changes_pending: AtomicBool,
    /// Unpatch a module once this many launches of its kernels in a row were not measured
    /// (0: never, as in `exact`).
    quiet_launches: AtomicU64,
    /// Ticket to (context, table).
    tickets: Mutex<HashMap<u64, (usize, usize)>>,
    next_ticket: AtomicU64,
    /// Launches that found no free table.
    unmeasured: AtomicU64,
    /// Tables whose patch found no entry for some granule.
    overflowed: AtomicU64,
    /// Launches given a table; modules unpatched and patched again.
    measured: AtomicU64,
    unpatched: AtomicU64,
    repatched: AtomicU64,
    /// Launches to measure left unmeasured: their module stays unpatched.
    left_unpatched: AtomicU64,
    /// Launches not to measure that ran patched (every memory instruction calling the patch).
    patched_unmeasured: AtomicU64,
    /// Launches whose function's module, as known before (from `cuFuncGetModule` or an
    /// earlier launch), was not the module the launch callback named.
    module_mismatch: AtomicU64,
    /// Nanoseconds spent adding the patch and patching or unpatching modules, and reading
    /// tables back (copies, resets and the wait for them).
    patching_ns: AtomicU64,
    reading_ns: AtomicU64,
}

// SAFETY: the handles are the driver's, valid on any thread.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

static ENGINE: OnceLock<Engine> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);

/// What the caller asks of the launch it makes next ([`arm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Nothing: its footprint is known (learnt).
    Skip,
    /// Measure it: a new key of a kernel whose footprint was learnt before.
    Measure,
    /// Measure it: nothing was learnt of its kernel, or its footprint cannot be learnt (and
    /// `footprint=exact`).
    MeasureFirst,
}

/// Why a launch to measure was not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmeasured {
    /// Every table was waiting to be read.
    NoTable,
    /// Its module stays unpatched (patched again as often as it may be).
    ModuleUnpatched,
}

/// What became of the launch this thread made last ([`outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It was not to be measured.
    NotAsked,
    Measured(Ticket),
    Unmeasured(Unmeasured),
}

/// The launch this thread is making now: the caller's function handle and request, and
/// whether a table is ready for it.
#[derive(Clone, Copy)]
struct Armed {
    function: usize,
    ask: Ask,
    ready: bool,
}

const DISARMED: Armed = Armed { function: 0, ask: Ask::Skip, ready: false };

thread_local! {
    /// Whether this thread holds [`Engine::patching`].
    static PATCHING: Cell<bool> = const { Cell::new(false) };
    static ARMED: Cell<Armed> = const { Cell::new(DISARMED) };
    static LAST: Cell<Outcome> = const { Cell::new(Outcome::NotAsked) };
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

/// Loads the API and subscribes. Call before the program's first driver call (the shim's
/// constructor), once; later calls return the first answer.
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
    for domain in [api::DOMAIN_RESOURCE, api::DOMAIN_LAUNCH, api::DOMAIN_GRAPHS] {
        // SAFETY: the subscriber just made.
        let status = unsafe { (api.enable_domain)(1, subscriber, domain) };
        if status != api::SANITIZER_SUCCESS {
            return Err(Unavailable::Refused(status));
        }
    }
    let engine = Engine {
        api,
        driver,
        pools: Mutex::new(HashMap::new()),
        patched: Mutex::new(Vec::new()),
        patching: Mutex::new(()),
        modules: Mutex::new(Modules::default()),
        changes: Mutex::new(Vec::new()),
        changes_pending: AtomicBool::new(false),
        quiet_launches: AtomicU64::new(0),
        tickets: Mutex::new(HashMap::new()),
        next_ticket: AtomicU64::new(1),
        unmeasured: AtomicU64::new(0),
        overflowed: AtomicU64::new(0),
        measured: AtomicU64::new(0),
        unpatched: AtomicU64::new(0),
        repatched: AtomicU64::new(0),
        left_unpatched: AtomicU64::new(0),
        patched_unmeasured: AtomicU64::new(0),
        module_mismatch: AtomicU64::new(0),
        patching_ns: AtomicU64::new(0),
        reading_ns: AtomicU64::new(0),
    };
    let _ = ENGINE.set(engine);
    Ok(())
}

/// A module's patching.
struct Module {
    patched: bool,
    /// Launches of its kernels in a row that were not to be measured.
    quiet: u64,
    /// Times it was patched again (or queued to be).
    repatched: u32,
    /// A change is queued.
    queued: bool,
}

impl Module {
    const LOADED: Module = Module { patched: true, quiet: 0, repatched: 0, queued: false };

    /// Whether a launch asking `ask` may have the module patched again.
    fn may_repatch(&self, ask: Ask) -> bool {
        match ask {
            Ask::Skip => false,
            Ask::Measure => self.repatched < REPATCHES_FOR_NEW_KEYS,
            Ask::MeasureFirst => self.repatched < REPATCHES,
        }
    }

    /// Quiet launches before it is unpatched: `base`, four times more at each re-patch.
    fn quiet_limit(&self, base: u64) -> u64 {
        base.saturating_mul(1 << (2 * self.repatched.min(16)))
    }
}

/// The modules the engine saw, by handle, and the module of each function the caller
/// launched (by the caller's handle), learnt at its launches.
#[derive(Default)]
struct Modules {
    by_handle: HashMap<usize, Module>,
    of_function: HashMap<usize, usize>,
}

/// Lets modules whose kernels went `launches` launches in a row unmeasured run unpatched
/// (their code as compiled, at native speed), patched again when a launch of theirs is to
/// be measured, within [`REPATCHES`] (`footprint=learn`). 0: modules stay patched.
pub fn unpatch_quiet_modules(launches: u64) {
    if let Some(engine) = ENGINE.get() {
        engine.quiet_launches.store(launches, Ordering::Relaxed);
    }
}

/// Patches or unpatches the modules queued. Call outside callbacks, before launches (cheap
/// when nothing is queued).
#[inline]
fn maintain(engine: &Engine) {
    if !engine.changes_pending.load(Ordering::Acquire) {
        return;
    }
    let changes = std::mem::take(&mut *engine.changes.lock().unwrap_or_else(|e| e.into_inner()));
    engine.changes_pending.store(false, Ordering::Release);
    for (module, patch) in changes {
        let handle = module as Handle;
        // SAFETY: a module the driver reported loaded (an unloaded one fails harmlessly).
        let status = engine.serialized(|| unsafe {
            if patch {
                patch::instruct(&engine.api, handle);
                (engine.api.patch_module)(handle)
            } else {
                (engine.api.unpatch_module)(handle)
            }
        });
        let mut modules = engine.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.by_handle.get_mut(&module) {
            m.queued = false;
            if status == api::SANITIZER_SUCCESS {
                m.patched = patch;
                m.quiet = 0;
                if patch { &engine.repatched } else { &engine.unpatched }.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Engine {
    /// Runs `f` (calls that add the patch, or patch or unpatch modules) while no other
    /// thread runs such calls; the thread running them may come back in (a callback the API
    /// makes from inside one).
    fn serialized<R>(&self, f: impl FnOnce() -> R) -> R {
        if PATCHING.try_with(Cell::get).unwrap_or(false) {
            return f();
        }
        let _held = self.patching.lock().unwrap_or_else(|e| e.into_inner());
        let _ = PATCHING.try_with(|p| p.set(true));
        let started = Instant::now();
        let result = f();
        self.patching_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let _ = PATCHING.try_with(|p| p.set(false));
        result
    }

    fn queue(&self, module: usize, patch: bool) {
        self.changes.lock().unwrap_or_else(|e| e.into_inner()).push((module, patch));
        self.changes_pending.store(true, Ordering::Release);
    }

    /// Before a launch of `function` to measure: if its module is known to be unpatched,
    /// queues it to be patched again if `ask` may, else says why the launch goes unmeasured.
    /// A function whose module the driver does not say is left to the launch callback.
    fn ready_module(&self, function: usize, ask: Ask) -> Result<(), Unmeasured> {
        if self.quiet_launches.load(Ordering::Relaxed) == 0 {
            // Modules are never unpatched (`footprint=exact`).
            return Ok(());
        }
        let known = self.modules.lock().unwrap_or_else(|e| e.into_inner()).of_function.get(&function).copied();
        let module = known.or_else(|| {
            let mut module: Handle = core::ptr::null_mut();
            // SAFETY: a real driver function, the caller's function handle and a valid
            // out-pointer; called outside any callback.
            let found =
                self.driver.func_get_module.is_some_and(|get| unsafe { get(&mut module, function as Handle) } == 0);
            (found && !module.is_null()).then_some(module as usize)
        });
        let Some(module) = module else {
            return Ok(());
        };
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if known.is_none() {
            modules.of_function.insert(function, module);
        }
        let Some(m) = modules.by_handle.get_mut(&module) else {
            return Ok(());
        };
        if m.patched || m.queued {
            return Ok(());
        }
        if !m.may_repatch(ask) {
            self.left_unpatched.fetch_add(1, Ordering::Relaxed);
            return Err(Unmeasured::ModuleUnpatched);
        }
        m.repatched += 1;
        m.queued = true;
        drop(modules);
        self.queue(module, true);
        Ok(())
    }

    /// At a launch's callback: notes which module the caller's function is in, counts the
    /// launch toward its module's quiet or resets it, queues the module's change if one is
    /// due, and says whether the launch may be measured (its module is patched).
    fn launch_begins(&self, module: Handle, armed: Armed) -> Result<(), Unmeasured> {
        let quiet_base = self.quiet_launches.load(Ordering::Relaxed);
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if armed.function != 0 {
            match modules.of_function.insert(armed.function, module as usize) {
                Some(before) if before != module as usize => {
                    self.module_mismatch.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        let m = modules.by_handle.entry(module as usize).or_insert(Module::LOADED);
        let change = if armed.ask == Ask::Skip {
            m.quiet += 1;
            (quiet_base > 0 && m.patched && m.quiet >= m.quiet_limit(quiet_base)).then_some(false)
        } else {
            m.quiet = 0;
            let repatch = !m.patched && !m.queued && m.may_repatch(armed.ask);
            if repatch {
                m.repatched += 1;
            }
            repatch.then_some(true)
        };
        let patched = m.patched;
        if patched && armed.ask == Ask::Skip {
            self.patched_unmeasured.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(patch) = change.filter(|_| !m.queued) {
            m.queued = true;
            drop(modules);
            self.queue(module as usize, patch);
        }
        if patched {
            Ok(())
        } else {
            // (A launch [`Engine::ready_module`] refused was counted there.)
            if armed.ready {
                self.left_unpatched.fetch_add(1, Ordering::Relaxed);
            }
            Err(Unmeasured::ModuleUnpatched)
        }
    }
}

/// Before the real call of a launch of `function` (the caller's handle), outside any
/// callback: applies the modules' queued changes and, if `ask` is to measure, makes ready
/// what that needs (its module patched, a table free). What became of the launch is known
/// once the real call returned ([`outcome`]).
pub fn arm(function: *mut c_void, ask: Ask) {
    let Some(engine) = ENGINE.get() else { return };
    maintain(engine);
    let ready = match ask {
        Ask::Skip => Ok(false),
        ask => engine.ready_module(function as usize, ask).and_then(|()| {
            maintain(engine);
            prepare(engine)
        }),
    };
    let _ = ARMED.try_with(|a| a.set(Armed { function: function as usize, ask, ready: ready == Ok(true) }));
    let last = match ready {
        Err(why) => Outcome::Unmeasured(why),
        Ok(_) => Outcome::NotAsked,
    };
    let _ = LAST.try_with(|l| l.set(last));
}

/// What became of the launch this thread just made (after [`arm`] and the real call).
pub fn outcome() -> Outcome {
    let _ = ARMED.try_with(|a| a.set(DISARMED));
    LAST.try_with(|l| l.replace(Outcome::NotAsked)).unwrap_or(Outcome::NotAsked)
}

/// What the engine did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Launches given a table.
    pub measured: u64,
    /// Launches to measure that found no table free.
    pub no_table: u64,
    /// Tables that overflowed.
    pub overflowed: u64,
    /// Modules unpatched, and patched again.
    pub unpatched: u64,
    pub repatched: u64,
    /// Launches to measure left unmeasured: their module stays unpatched.
    pub left_unpatched: u64,
    /// Launches not to measure that ran patched: what `footprint=learn` pays for nothing.
    pub patched_unmeasured: u64,
    /// Launches whose module was not the one known for their function before (the driver's
    /// `cuFuncGetModule` and the Compute Sanitizer API disagreeing, or a handle reused).
    pub module_mismatch: u64,
    /// Time spent patching (adding the patch, patching and unpatching modules) and reading
    /// tables back, in microseconds: what a module's toggling and a collection cost.
    pub patching_us: u64,
    pub reading_us: u64,
}

/// What the engine did so far.
pub fn counters() -> Counters {
    ENGINE.get().map_or(Counters::default(), |e| {
        let c = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counters {
            measured: c(&e.measured),
            no_table: c(&e.unmeasured),
            overflowed: c(&e.overflowed),
            unpatched: c(&e.unpatched),
            repatched: c(&e.repatched),
            left_unpatched: c(&e.left_unpatched),
            patched_unmeasured: c(&e.patched_unmeasured),
            module_mismatch: c(&e.module_mismatch),
            patching_us: c(&e.patching_ns) / 1000,
            reading_us: c(&e.reading_ns) / 1000,
        }
    })
}

unsafe extern "C" fn callback(_: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let Some(engine) = ENGINE.get() else { return };
    match (domain, cbid) {
        (api::DOMAIN_RESOURCE, api::CBID_RESOURCE_MODULE_LOADED) => {
            // SAFETY: the data of this callback.
            let data = unsafe { &*(data as *const api::ModuleData) };
            let added = engine.serialized(|| {
                let mut patched = engine.patched.lock().unwrap_or_else(|e| e.into_inner());
                if !patched.contains(&(data.context as usize)) {
                    // SAFETY: the patch image lives for the process.
                    if unsafe { (engine.api.add_patches)(patch::IMAGE.as_ptr().cast(), data.context) }
                        != api::SANITIZER_SUCCESS
                    {
                        return false;
                    }
                    patched.push(data.context as usize);
                }
                drop(patched);
                unsafe {
                    patch::instruct(&engine.api, data.module);
                    (engine.api.patch_module)(data.module);
                }
                true
            });
            if !added {
                return;
            }
            // A new module at a handle an unloaded one had: patched, counted afresh, and no
            // function known to be in it yet.
            let mut modules = engine.modules.lock().unwrap_or_else(|e| e.into_inner());
            modules.by_handle.insert(data.module as usize, Module::LOADED);
            modules.of_function.retain(|_, m| *m != data.module as usize);
        }
        (api::DOMAIN_RESOURCE, api::CBID_RESOURCE_CONTEXT_DESTROY_STARTING) => {
            let data = unsafe { &*(data as *const api::ContextData) };
            let ctx = data.context as usize;
            engine.pools.lock().unwrap_or_else(|e| e.into_inner()).remove(&ctx);
            engine.patched.lock().unwrap_or_else(|e| e.into_inner()).retain(|&c| c != ctx);
            engine.tickets.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, (c, _)| *c != ctx);
        }
        (api::DOMAIN_LAUNCH, api::CBID_LAUNCH_BEGIN) => {
            let data = unsafe { &*(data as *const api::LaunchData) };
            let armed = ARMED.try_with(|a| a.replace(DISARMED)).unwrap_or(DISARMED);
            // An unpatched module's kernel records nothing: its launch goes unmeasured (and
            // the module is queued to be patched again, if it may be).
            let allowed = engine.launch_begins(data.module, armed);
            let table = match allowed {
                Ok(()) if armed.ready => engine.launch_table(data.context).ok_or(Unmeasured::NoTable),
                Ok(()) => Err(Unmeasured::NoTable),
                Err(why) => Err(why),
            };
            let userdata = table.map_or(core::ptr::null_mut(), |(_, t)| t as *mut c_void);
            // Every launch says its table, or none: a table left from an earlier launch of
            // the same kernel would be written again.
            unsafe { (engine.api.set_launch_callback_data)(data.h_launch, data.function, data.h_stream, userdata) };
            if armed.ask != Ask::Skip {
                let outcome = match table {
                    Ok((ticket, _)) => Outcome::Measured(ticket),
                    Err(why) => Outcome::Unmeasured(why),
                };
                let _ = LAST.try_with(|l| l.set(outcome));
            }
        }
        (api::DOMAIN_GRAPHS, api::CBID_GRAPHS_NODE_LAUNCH_BEGIN) => {
            // Graph kernels are not measured (the model hears of them as the graph's, at
            // cuGraphLaunch): they run with no table.
            let data = unsafe { &*(data as *const api::GraphNodeLaunchData) };
            if data.node_type == api::GRAPH_NODE_KERNEL {
                let l = &data.launch;
                unsafe { (engine.api.set_launch_callback_data)(l.h_launch, l.function, l.h_stream, core::ptr::null()) };
            }
        }
        _ => {}
    }
}

impl Engine {
    /// A free table of `ctx` for a launch, and its ticket; None when none is free. Calls no
    /// driver function: [`prepare`] filled the pool.
    fn launch_table(&self, ctx: Handle) -> Option<(Ticket, usize)> {
        let table =
            self.pools.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&(ctx as usize)).and_then(|p| p.free.pop())?;
        let ticket = Ticket(self.next_ticket.fetch_add(1, Ordering::Relaxed));
        self.measured.fetch_add(1, Ordering::Relaxed);
        self.tickets.lock().unwrap_or_else(|e| e.into_inner()).insert(ticket.0, (ctx as usize, table));
        Some((ticket, table))
    }

    /// Allocates a chunk of zeroed tables. The zeroing is ordered before their first use by
    /// a synchronization of the engine's own stream (it holds only this memset).
    fn grow(&self, ctx: Handle, pool: &mut Pool) {
        let Some(stream) = pool.stream else { return };
        let bytes = TABLES_PER_CHUNK * TABLE_BYTES;
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
        pool.allocated += TABLES_PER_CHUNK;
        pool.free.extend((0..TABLES_PER_CHUNK).rev().map(|i| chunk as usize + i * TABLE_BYTES));
    }
}

/// Before a launch to be measured, outside any callback: makes sure the current context has
/// the engine's stream and a free table. Ok(false): no current context (the launch will
/// fail); Err: every table is waiting to be read.
fn prepare(engine: &Engine) -> Result<bool, Unmeasured> {
    let mut ctx: Handle = core::ptr::null_mut();
    // SAFETY: a real driver function and a valid out-pointer.
    if unsafe { (engine.driver.ctx_get_current)(&mut ctx) } != 0 || ctx.is_null() {
        return Ok(false);
    }
    let mut pools = engine.pools.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pools.entry(ctx as usize).or_default();
    if !pool.free.is_empty() {
        return Ok(true);
    }
    if pool.stream.is_none() {
        let mut stream: Handle = core::ptr::null_mut();
        let mut handle: Handle = core::ptr::null_mut();
        // SAFETY: real driver functions; CU_STREAM_NON_BLOCKING: it waits on no stream.
        if unsafe { (engine.driver.stream_create)(&mut stream, 1) } != 0
            || unsafe { (engine.api.get_stream_handle)(ctx, stream, &mut handle) } != api::SANITIZER_SUCCESS
        {
            return Ok(false);
        }
        pool.stream = Some(handle);
    }
    if pool.allocated < MAX_TABLES {
        engine.grow(ctx, pool);
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
    if let Some((ctx, table)) = taken {
        if let Some(pool) = engine.pools.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&ctx) {
            pool.free.push(table);
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
    let mut taken: Vec<(usize, usize, Ticket)> = {
        let mut map = engine.tickets.lock().unwrap_or_else(|e| e.into_inner());
        tickets.iter().filter_map(|&t| map.remove(&t.0).map(|(ctx, table)| (ctx, table, t))).collect()
    };
    // Adjacent tables of one context are read and zeroed with one copy and one memset.
    taken.sort_unstable();
    let mut read_out: Vec<(Ticket, Option<Measured>)> = Vec::with_capacity(taken.len());
    let started = Instant::now();
    let mut pools = engine.pools.lock().unwrap_or_else(|e| e.into_inner());
    let mut i = 0;
    let mut host = Vec::new();
    while i < taken.len() {
        let (ctx, first, _) = taken[i];
        let mut j = i + 1;
        while j < taken.len() && taken[j].0 == ctx && taken[j].1 == taken[j - 1].1 + TABLE_BYTES {
            j += 1;
        }
        let run = &taken[i..j];
        let bytes = run.len() * TABLE_BYTES;
        let pool = pools.entry(ctx).or_default();
        let stream = pool.stream;
        host.resize(bytes, 0u8);
        let read = stream.is_some_and(|s| unsafe {
            (engine.api.memcpy_device_to_host)(host.as_mut_ptr().cast(), first as *mut c_void, bytes, s)
                == api::SANITIZER_SUCCESS
                && (engine.api.memset)(first as *mut c_void, 0, bytes, s) == api::SANITIZER_SUCCESS
        });
        for (k, &(_, table, ticket)) in run.iter().enumerate() {
            let measured = read.then(|| table::read(&host[k * TABLE_BYTES..(k + 1) * TABLE_BYTES]));
            if measured.as_ref().is_some_and(|m| m.overflow.is_some()) {
                engine.overflowed.fetch_add(1, Ordering::Relaxed);
            }
            read_out.push((ticket, measured));
            if read {
                pool.free.push(table);
            }
        }
        if let Some(s) = stream {
            unsafe { (engine.api.stream_synchronize)(s) };
        }
        i = j;
    }
    drop(pools);
    engine.reading_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    read_out.sort_unstable_by_key(|&(ticket, _)| ticket);
    for (ticket, measured) in read_out {
        found(ticket, measured);
    }
}
