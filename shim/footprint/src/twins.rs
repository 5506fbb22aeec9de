//! Twins: each module the program loads is loaded a second time, from the code the driver
//! loaded, and only that twin is patched. A launch to measure is sent to the twin's
//! function of the same name (same parameters, grid and stream); every other launch runs
//! the program's own code, unpatched, at native speed. A module's variables are copied
//! around a launch on its twin ([`crate::variables`]).

use core::ffi::{c_char, CStr};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;

use crate::api::Handle;
use crate::driver::Driver;
use crate::grid_waits::{self, Waits};
use crate::loads::{self, Load};
use crate::module_state::{self, State};
use crate::variables::{self, Variable, Variables};

/// Bytes of code kept at most for modules that have no twin yet: a module loaded past
/// that gets none (the driver holds the code; this is a copy).
const IMAGE_BUDGET: usize = 1 << 30;

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
    /// Twins of modules the program unloaded, with their variables' snapshots, to unload and
    /// free outside the driver's callbacks.
    pub retired: Vec<(Handle, u64)>,
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
        if let Some((_, Twin::Loaded(twin, variables))) = self.modules.remove(&(module as usize)) {
            self.retired.push((twin, variables.snapshot));
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
                            if let Ok((twin, variables)) = made {
                                t.retired.push((twin, variables.snapshot));
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

/// The module of the program's function (or `CUkernel`) `f`.
pub fn module_of(driver: &Driver, f: Handle) -> Option<Handle> {
    own_function(driver, f).map(|(_, module)| module)
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

/// The twin of `f` in `ctx` was launched: later launches load nothing.
pub fn launched(twins: &mut Twins, f: Handle, ctx: Handle) {
    if let Some((_, Ok(pair))) = twins.functions.get_mut(&(f as usize, ctx as usize)) {
        pair.launched = true;
    }
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
    // SAFETY: a real driver function, a valid out-pointer and an image that lives across the
    // call.
    let status = loads::during(Load::Twin, || unsafe { (driver.module_load_data)(&mut twin, image.as_ptr().cast()) });
    if status != 0 || twin.is_null() {
        return Err(NoTwin::NoCode);
    }
    let find = |module: Handle, name: &CString| {
        let (mut address, mut bytes) = (0u64, 0usize);
        // SAFETY: a real driver function, valid out-pointers, a NUL-terminated name.
        let found = unsafe { (driver.module_get_global)(&mut address, &mut bytes, module, name.as_ptr()) } == 0;
        found.then_some((address, bytes))
    };
    let mirrored: Option<Vec<Variable>> = variables
        .iter()
        .map(|v| {
            let name = CString::new(v.name.as_str()).ok()?;
            let ((own, bytes), (twin_address, twin_bytes)) = (find(module, &name)?, find(twin, &name)?);
            (bytes == twin_bytes).then_some(Variable { own, twin: twin_address, bytes, writable: v.writable })
        })
        .collect();
    match mirrored {
        Some(mirrored) => {
            let snapshot = variables::snapshot(driver, &mirrored);
            Ok((twin, Arc::new(Variables::new(mirrored, snapshot))))
        }
        None => {
            // SAFETY: the twin just loaded, used by nothing.
            unsafe { (driver.module_unload)(twin) };
            Err(NoTwin::ModuleState)
        }
    }
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

/// Unloads the twins of modules the program unloaded, and frees their snapshots.
pub fn unload(driver: &Driver, retired: Vec<(Handle, u64)>) {
    for (twin, snapshot) in retired {
        // SAFETY: a twin this engine loaded and its snapshot, each given back once.
        unsafe {
            (driver.module_unload)(twin);
            if snapshot != 0 {
                (driver.mem_free)(snapshot);
            }
        }
    }
}
