//! Twins: each module the program loads is loaded a second time, from the code the driver
//! loaded, and only that twin is patched. A launch to measure is sent to the twin's
//! function of the same name (same parameters, grid and stream); every other launch runs
//! the program's own code, unpatched, at native speed.

use core::ffi::{c_char, c_void, CStr};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use crate::api::Handle;
use crate::grid_waits::{self, Waits};
use crate::module_state::{self, State};

/// Bytes of code kept at most for modules that have no twin yet: a module loaded past
/// that gets none (the driver holds the code; this is a copy).
const IMAGE_BUDGET: usize = 1 << 30;

/// The driver's functions twins are made with (the real ones, never the shim's hooks).
#[derive(Clone, Copy)]
pub struct Driver {
    pub func_get_module: unsafe extern "C" fn(*mut Handle, Handle) -> u32,
    pub kernel_get_function: Option<unsafe extern "C" fn(*mut Handle, Handle) -> u32>,
    pub func_get_name: unsafe extern "C" fn(*mut *const c_char, Handle) -> u32,
    pub module_load_data: unsafe extern "C" fn(*mut Handle, *const c_void) -> u32,
    pub module_get_function: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> u32,
    pub module_unload: unsafe extern "C" fn(Handle) -> u32,
    pub func_get_attribute: unsafe extern "C" fn(*mut i32, u32, Handle) -> u32,
    pub func_set_attribute: unsafe extern "C" fn(Handle, u32, i32) -> u32,
    pub module_get_global: unsafe extern "C" fn(*mut u64, *mut usize, Handle, *const c_char) -> u32,
    pub memcpy_dtod_async: unsafe extern "C" fn(u64, u64, usize, Handle) -> u32,
    pub event_record: unsafe extern "C" fn(Handle, Handle) -> u32,
    pub stream_wait_event: unsafe extern "C" fn(Handle, Handle, u32) -> u32,
    /// Where the driver has one (CUDA 12.8 and later): a module's variables are copied in
    /// one call, not one each.
    pub memcpy_batch_async: Option<BatchCopy>,
}

/// `cuMemcpyBatchAsync_v2` (CUDA 13), or `cuMemcpyBatchAsync` as CUDA 12.8 declared it
/// (with a failure index).
#[derive(Clone, Copy)]
pub enum BatchCopy {
    V2(
        unsafe extern "C" fn(
            *mut u64,
            *mut u64,
            *mut usize,
            usize,
            *mut CopyAttributes,
            *mut usize,
            usize,
            Handle,
        ) -> u32,
    ),
    V1(
        unsafe extern "C" fn(
            *mut u64,
            *mut u64,
            *mut usize,
            usize,
            *mut CopyAttributes,
            *mut usize,
            usize,
            *mut usize,
            Handle,
        ) -> u32,
    ),
}

/// `CUmemcpyAttributes`: how a batch's copies read their sources. Its location hints are
/// ignored for memory that is not managed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CopyAttributes {
    src_access_order: u32,
    src_location_hint: [i32; 2],
    dst_location_hint: [i32; 2],
    flags: u32,
}

/// A stream of the engine's in a launch's context and an event: a batch for a launch on the
/// legacy NULL stream, which takes none, runs there, after what the launch's stream did so
/// far and before what it does next.
#[derive(Clone, Copy, Debug)]
pub struct Detour {
    pub stream: Handle,
    pub event: Handle,
}

/// `CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`: the sources are read in stream order, after the
/// launches ahead on the stream (which may write a variable).
const IN_STREAM_ORDER: CopyAttributes =
    CopyAttributes { src_access_order: 1, src_location_hint: [0; 2], dst_location_hint: [0; 2], flags: 0 };

/// Why a launch cannot run on a twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTwin {
    /// Its module has state of its own that cannot be found by name, so a twin could not
    /// hold the program's values.
    ModuleState,
    /// Its module's code was not seen loading, or could not be read or loaded again.
    NoCode,
    /// Another thread is loading the twin, or making it would be unsafe now (device work
    /// may be waiting for the host, and loading code may wait for the device to drain).
    Busy,
}

/// A program's function and its twin.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The program's function (for a `CUkernel`, its function in the context).
    pub own: Handle,
    pub twin: Handle,
    /// Whether the twin was launched before (its first launch loads and patches its code).
    pub launched: bool,
    /// The module's variables, each in the program's module and in the twin.
    pub variables: Arc<Variables>,
    /// Where its kernel first waits on its grid dependencies, where its code says so.
    pub first_wait: Option<FirstWait>,
}

/// Where a twin's function first waits on its grid dependencies: its module and name (what
/// the Compute Sanitizer API finds its first instruction by) and the wait's byte offset from
/// its first instruction, read from the program's code, which the twin is a copy of.
#[derive(Clone, Debug)]
pub struct FirstWait {
    pub module: Handle,
    pub name: Arc<CStr>,
    pub offset: u32,
}

/// A module's variables and the twin's copies of them: before a launch on the twin, the
/// twin's take the program's values, and after it, those kernels may write give theirs back.
#[derive(Debug, Default)]
pub struct Variables {
    into_twin: Copies,
    back: Copies,
}

impl Variables {
    pub fn is_empty(&self) -> bool {
        self.into_twin.bytes.is_empty()
    }
}

/// Copies as a batch takes them: each one's destination, source and size.
#[derive(Debug, Default)]
struct Copies {
    to: Vec<u64>,
    from: Vec<u64>,
    bytes: Vec<usize>,
}

impl Copies {
    fn push(&mut self, to: u64, from: u64, bytes: usize) {
        self.to.push(to);
        self.from.push(from);
        self.bytes.push(bytes);
    }
}

/// A module's twin, or why it has none (`Loading` while a thread loads it).
#[derive(Clone)]
enum Twin {
    Loaded(Handle, Arc<Variables>),
    Loading,
    None(NoTwin),
}

/// What the engine knows of the program's modules, by handle.
#[derive(Default)]
pub struct Twins {
    /// Each module's context and code, until its twin is loaded.
    code: HashMap<usize, (usize, Vec<u8>)>,
    code_bytes: usize,
    /// Each module's context and twin.
    modules: HashMap<usize, (usize, Twin)>,
    /// Each (program's function or kernel handle, context): its module and pair.
    functions: HashMap<(usize, usize), (usize, Result<Pair, NoTwin>)>,
    /// Each module's context and which of its kernels wait on their grid dependencies.
    grid_waits: HashMap<usize, (usize, Arc<Waits>)>,
    /// Twins of modules the program unloaded, to unload outside the driver's callbacks.
    pub retired: Vec<Handle>,
    /// Twins loaded (those whose module has variables, mirrored), and modules left without
    /// one, by reason.
    pub loaded: u64,
    pub mirrored: u64,
    pub with_state: u64,
    pub without_code: u64,
}

// SAFETY: the handles are the driver's, valid on any thread.
unsafe impl Send for Twins {}

impl Twins {
    /// The program loaded `module` in `context` (in the driver's callback): its code is kept
    /// for its twin.
    pub fn loaded(&mut self, context: Handle, module: Handle, code: &[u8]) {
        self.forget(module);
        self.grid_waits.insert(module as usize, (context as usize, Arc::new(grid_waits::of(code))));
        if self.code_bytes + code.len() <= IMAGE_BUDGET {
            self.code_bytes += code.len();
            self.code.insert(module as usize, (context as usize, code.to_vec()));
        }
    }

    /// The program unloads `module` (or a new one was loaded at its handle): its twin goes.
    pub fn forget(&mut self, module: Handle) {
        if let Some((_, code)) = self.code.remove(&(module as usize)) {
            self.code_bytes -= code.len();
        }
        if let Some((_, Twin::Loaded(twin, _))) = self.modules.remove(&(module as usize)) {
            self.retired.push(twin);
        }
        self.functions.retain(|_, (m, _)| *m != module as usize);
        self.grid_waits.remove(&(module as usize));
    }

    /// `context` is destroyed, and its twins with it.
    pub fn context_destroyed(&mut self, context: Handle) {
        let ctx = context as usize;
        let gone: Vec<usize> = self.code.iter().filter(|(_, (c, _))| *c == ctx).map(|(&m, _)| m).collect();
        for m in gone {
            if let Some((_, code)) = self.code.remove(&m) {
                self.code_bytes -= code.len();
            }
        }
        self.modules.retain(|_, (c, _)| *c != ctx);
        self.functions.retain(|&(_, c), _| c != ctx);
        self.grid_waits.retain(|_, (c, _)| *c != ctx);
    }
}

/// Whether the program's function (or `CUkernel`) `f` waits on its grid dependencies
/// somewhere in its code: None when its module's code was not seen or cannot be read.
/// Outside the driver's callbacks; calls the driver with `twins` unlocked.
pub fn waits_for_grid(driver: &Driver, twins: &std::sync::Mutex<Twins>, f: Handle) -> Option<bool> {
    let (own, module) = own_function(driver, f)?;
    let waits = twins.lock().unwrap_or_else(|e| e.into_inner()).grid_waits.get(&(module as usize))?.1.clone();
    let Waits::In(waiting) = &*waits else { return None };
    let mut name: *const c_char = core::ptr::null();
    // SAFETY: a real driver function and a valid out-pointer; the name is the driver's,
    // NUL-terminated, live while the module is.
    if unsafe { (driver.func_get_name)(&mut name, own) } != 0 || name.is_null() {
        return None;
    }
    // SAFETY: as above.
    let name = unsafe { CStr::from_ptr(name) }.to_str().ok()?;
    Some(waiting.contains_key(name))
}

/// The twin of the program's function (or `CUkernel`) `f` in the current context `ctx`,
/// loading its module's twin if it has none yet. Loading code, or the first launch of a
/// twin's function, may wait for the device to drain: unless `may_load`, neither is done
/// (`Busy`). Outside the driver's callbacks; calls the driver only with `twins` unlocked (a
/// module loading on another thread calls back into the engine from inside the driver).
pub fn pair(
    driver: &Driver,
    twins: &std::sync::Mutex<Twins>,
    f: Handle,
    ctx: Handle,
    may_load: bool,
) -> Result<Pair, NoTwin> {
    let lock = || twins.lock().unwrap_or_else(|e| e.into_inner());
    match lock().functions.get(&(f as usize, ctx as usize)) {
        Some((_, Ok(pair))) if !pair.launched && !may_load => return Err(NoTwin::Busy),
        Some((_, pair)) => return pair.clone(),
        None if !may_load => return Err(NoTwin::Busy),
        None => {}
    }
    let (own, module) = own_function(driver, f).ok_or(NoTwin::NoCode)?;
    let twin = {
        let mut t = lock();
        match t.modules.get(&(module as usize)).map(|(_, twin)| twin.clone()) {
            Some(Twin::Loaded(twin, variables)) => Ok((twin, variables)),
            Some(Twin::Loading) => return Err(NoTwin::Busy),
            Some(Twin::None(why)) => Err(why),
            None => match t.code.remove(&(module as usize)) {
                None => {
                    t.without_code += 1;
                    t.modules.insert(module as usize, (ctx as usize, Twin::None(NoTwin::NoCode)));
                    Err(NoTwin::NoCode)
                }
                Some((context, code)) => {
                    t.code_bytes -= code.len();
                    t.modules.insert(module as usize, (context, Twin::Loading));
                    drop(t);
                    let made = load(driver, &code, module);
                    let mut t = lock();
                    match &made {
                        Ok((_, variables)) => {
                            t.loaded += 1;
                            t.mirrored += u64::from(!variables.is_empty());
                        }
                        Err(NoTwin::ModuleState) => t.with_state += 1,
                        Err(_) => t.without_code += 1,
                    }
                    // Unloaded meanwhile: the twin goes too.
                    match t.modules.get_mut(&(module as usize)) {
                        Some((_, slot @ Twin::Loading)) => {
                            *slot = match &made {
                                Ok((twin, variables)) => Twin::Loaded(*twin, variables.clone()),
                                Err(why) => Twin::None(*why),
                            };
                        }
                        _ => {
                            if let Ok((twin, _)) = made {
                                t.retired.push(twin);
                            }
                            return Err(NoTwin::Busy);
                        }
                    }
                    made
                }
            },
        }
    };
    let pair = twin.and_then(|(twin, variables)| {
        let mut name: *const c_char = core::ptr::null();
        let mut twin_function: Handle = core::ptr::null_mut();
        // SAFETY: real driver functions, valid out-pointers; the name is the driver's, live
        // while the module is, and NUL-terminated.
        let found = unsafe {
            (driver.func_get_name)(&mut name, own) == 0
                && !name.is_null()
                && (driver.module_get_function)(&mut twin_function, twin, name) == 0
        };
        if !found {
            return Err(NoTwin::NoCode);
        }
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(name) };
        let waits = lock().grid_waits.get(&(module as usize)).map(|(_, w)| w.clone());
        let first_wait = match (waits.as_deref(), name.to_str()) {
            (Some(Waits::In(waiting)), Ok(kernel)) => waiting.get(kernel).copied().flatten().map(|offset| FirstWait {
                module: twin,
                name: name.into(),
                offset,
            }),
            _ => None,
        };
        Ok(Pair { own, twin: twin_function, launched: false, variables, first_wait })
    });
    lock().functions.insert((f as usize, ctx as usize), (module as usize, pair.clone()));
    pair
}

/// The program's function behind `f` and its module: `f` itself, or for a `CUkernel` (which
/// cudart passes where a function is declared) its function in the current context.
fn own_function(driver: &Driver, f: Handle) -> Option<(Handle, Handle)> {
    let module_of = |function: Handle| {
        let mut module: Handle = core::ptr::null_mut();
        // SAFETY: a real driver function and a valid out-pointer.
        (unsafe { (driver.func_get_module)(&mut module, function) } == 0 && !module.is_null()).then_some(module)
    };
    if let Some(module) = module_of(f) {
        return Some((f, module));
    }
    let get = driver.kernel_get_function?;
    let mut function: Handle = core::ptr::null_mut();
    // SAFETY: a real driver function and a valid out-pointer.
    if unsafe { get(&mut function, f) } != 0 || function.is_null() {
        return None;
    }
    module_of(function).map(|module| (function, module))
}

thread_local! {
    /// Whether this thread is loading a twin: the driver's load callback patches it.
    static LOADING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The twin of `f` in `ctx` was launched: later launches load nothing.
pub fn launched(twins: &mut Twins, f: Handle, ctx: Handle) {
    if let Some((_, Ok(pair))) = twins.functions.get_mut(&(f as usize, ctx as usize)) {
        pair.launched = true;
    }
}

/// Whether the module the driver reports loaded on this thread is a twin.
pub fn loading_twin() -> bool {
    LOADING.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// Loads a twin of `module` from `code` (patched by the load's callback), with each of the
/// module's variables found in both.
fn load(driver: &Driver, code: &[u8], module: Handle) -> Result<(Handle, Arc<Variables>), NoTwin> {
    let variables = match module_state::of(code) {
        State::Variables(variables) => variables,
        State::Unknown => return Err(NoTwin::ModuleState),
    };
    // PTX text must end in a NUL; a cubin carries its size.
    let mut owned;
    let image = if code.starts_with(b"\x7fELF") || code.last() == Some(&0) {
        code
    } else {
        owned = code.to_vec();
        owned.push(0);
        &owned[..]
    };
    let mut twin: Handle = core::ptr::null_mut();
    let _ = LOADING.try_with(|l| l.set(true));
    // SAFETY: a real driver function, a valid out-pointer and an image that lives across the
    // call.
    let status = unsafe { (driver.module_load_data)(&mut twin, image.as_ptr().cast()) };
    let _ = LOADING.try_with(|l| l.set(false));
    if status != 0 || twin.is_null() {
        return Err(NoTwin::NoCode);
    }
    let find = |module: Handle, name: &CString| {
        let (mut address, mut bytes) = (0u64, 0usize);
        // SAFETY: a real driver function, valid out-pointers, a NUL-terminated name.
        let found = unsafe { (driver.module_get_global)(&mut address, &mut bytes, module, name.as_ptr()) } == 0;
        found.then_some((address, bytes))
    };
    let mut mirrored = Some(Variables::default());
    for v in &variables {
        let found =
            CString::new(v.name.as_str()).ok().and_then(|name| Some((find(module, &name)?, find(twin, &name)?)));
        match (found, mirrored.as_mut()) {
            (Some(((own, bytes), (twin_address, twin_bytes))), Some(m)) if bytes == twin_bytes => {
                m.into_twin.push(twin_address, own, bytes);
                if v.writable {
                    m.back.push(own, twin_address, bytes);
                }
            }
            _ => mirrored = None,
        }
    }
    match mirrored {
        Some(mirrored) => Ok((twin, Arc::new(mirrored))),
        None => {
            // SAFETY: the twin just loaded, used by nothing.
            unsafe { (driver.module_unload)(twin) };
            Err(NoTwin::ModuleState)
        }
    }
}

/// Copies each variable of `pair` into the twin (`into_twin`) or, those kernels may write,
/// back to the program's module, on `stream` (the launch's, so ordered with it), in one
/// batch where the driver has them (by `detour` on the legacy NULL stream). The variables
/// copied and the driver calls that copied them, or None where a copy was refused.
pub fn mirror(
    driver: &Driver,
    pair: &Pair,
    stream: Handle,
    into_twin: bool,
    detour: Option<Detour>,
) -> Option<(u64, u64)> {
    let copies = if into_twin { &pair.variables.into_twin } else { &pair.variables.back };
    let count = copies.bytes.len();
    if count == 0 {
        return Some((0, 0));
    }
    if let Some(batch) = driver.memcpy_batch_async {
        let legacy = stream.is_null() || stream as usize == 1;
        let batched = match (legacy, detour) {
            (false, _) => batch_copy(batch, copies, stream),
            // SAFETY: real driver functions on the launch's stream and the detour's stream
            // and event, all of the launch's context.
            (true, Some(d)) => unsafe {
                (driver.event_record)(d.event, stream) == 0
                    && (driver.stream_wait_event)(d.stream, d.event, 0) == 0
                    && batch_copy(batch, copies, d.stream)
                    && (driver.event_record)(d.event, d.stream) == 0
                    && (driver.stream_wait_event)(stream, d.event, 0) == 0
            },
            (true, None) => false,
        };
        if batched {
            return Some((count as u64, 1));
        }
    }
    for i in 0..count {
        // SAFETY: a real driver function; both variables are live, of `bytes` each.
        if unsafe { (driver.memcpy_dtod_async)(copies.to[i], copies.from[i], copies.bytes[i], stream) } != 0 {
            return None;
        }
    }
    Some((count as u64, count as u64))
}

/// `copies` in one call on `stream`: whether the driver accepted them.
fn batch_copy(batch: BatchCopy, copies: &Copies, stream: Handle) -> bool {
    let count = copies.bytes.len();
    let (mut attributes, mut first, mut failed) = (IN_STREAM_ORDER, 0usize, 0usize);
    let (to, from, bytes) =
        (copies.to.as_ptr().cast_mut(), copies.from.as_ptr().cast_mut(), copies.bytes.as_ptr().cast_mut());
    // SAFETY: a real driver function; three arrays of `count` entries, which the driver only
    // reads, one attribute for them all, first applying to copy 0; every variable is live,
    // of its size in both modules.
    let status = unsafe {
        match batch {
            BatchCopy::V2(f) => f(to, from, bytes, count, &mut attributes, &mut first, 1, stream),
            BatchCopy::V1(f) => f(to, from, bytes, count, &mut attributes, &mut first, 1, &mut failed, stream),
        }
    };
    status == 0
}

/// Function attributes a program may set at run time that a launch depends on (dynamic
/// shared memory above 48 KiB, the carveout, cluster policy): the twin takes the program's
/// values before each measured launch.
const ATTRIBUTES: [u32; 4] = [
    8,  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    9,  // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    14, // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    15, // CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
];

/// Gives the twin the program's function's attributes.
pub fn copy_attributes(driver: &Driver, pair: &Pair) {
    for attribute in ATTRIBUTES {
        let (mut own, mut twin) = (0i32, 0i32);
        // SAFETY: real driver functions on live function handles, valid out-pointers.
        unsafe {
            if (driver.func_get_attribute)(&mut own, attribute, pair.own) == 0
                && (driver.func_get_attribute)(&mut twin, attribute, pair.twin) == 0
                && own != twin
            {
                (driver.func_set_attribute)(pair.twin, attribute, own);
            }
        }
    }
}

/// Unloads the twins of modules the program unloaded.
pub fn unload(driver: &Driver, retired: Vec<Handle>) {
    for twin in retired {
        // SAFETY: a twin this engine loaded, unloaded once.
        unsafe { (driver.module_unload)(twin) };
    }
}
