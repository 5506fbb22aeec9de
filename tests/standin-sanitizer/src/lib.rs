//! A stand-in `libsanitizer-public.so` for tests on the stand-in driver: the Compute
//! Sanitizer functions the footprint engine calls, host memory standing for the device's
//! (`sanitizerAlloc` is `calloc`, copies are `memcpy`, streams are the engine's own handles),
//! module loads reported to the subscriber with their code, and the device played for
//! kernels named `footprint_*` of patched modules ([`launched`]).

use core::ffi::{c_char, c_void, CStr};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use streamsan_footprint::table::{emulate, is_early, table_bytes, EARLY, EARLY_TAG, GRANULE_SHIFT, WIDE_TAG};

type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Handle = *mut c_void;

static CALLBACK: AtomicUsize = AtomicUsize::new(0);

/// Modules patched, by handle.
static PATCHED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Each function's callback data (`sanitizerSetCallbackData`): the table its launches write.
static CALLBACK_DATA: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
/// Each function's first program counter, by module and name, given out by
/// `sanitizerGetFunctionPcAndSize` ([`FUNCTION_BYTES`] apart).
static FUNCTIONS: Mutex<Option<HashMap<(usize, String), u64>>> = Mutex::new(None);
/// The code of every function, in bytes: an access made after its kernel's first wait is at
/// its last instruction, one before it at its first.
const FUNCTION_BYTES: u64 = 0x1000;

/// Appends `line` to `STANDIN_SANITIZER_LOG`, if set: for each launch, `measured NAME` (a
/// patched module's, given a table), `patched NAME` (a patched module's, given none) or
/// `native NAME` (a module's that was never patched); `patch MODULE` for a module patched.
fn log(line: &str) {
    if let Some(file) = std::env::var_os("STANDIN_SANITIZER_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The header's `Sanitizer_ResourceModuleData`.
#[repr(C)]
struct ModuleData {
    context: Handle,
    module: Handle,
    cubin_size: usize,
    cubin: *const c_char,
    library: Handle,
}

const OK: u32 = 0;

/// `sanitizerSubscribe`.
///
/// # Safety
/// `subscriber` is a valid out-pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerSubscribe(
    subscriber: *mut Handle,
    callback: Callback,
    _userdata: *mut c_void,
) -> u32 {
    // As when another tool holds the API.
    if std::env::var_os("STANDIN_SANITIZER_TAKEN").is_some_and(|v| v == "1") {
        return 10;
    }
    CALLBACK.store(callback as usize, Ordering::Release);
    unsafe { *subscriber = 1 as Handle };
    // Attach to the stand-in driver, loaded by the process (the shim loads it first).
    let driver = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if !driver.is_null() {
        let attach = unsafe { libc::dlsym(driver, c"standin_attach_sanitizer".as_ptr()) };
        if !attach.is_null() {
            type LaunchHook =
                unsafe extern "C" fn(Handle, Handle, Handle, *const c_char, *mut *mut c_void, *const usize, usize);
            type ModuleHook = unsafe extern "C" fn(Handle, Handle, *const u8, usize);
            let attach: extern "C" fn(LaunchHook, ModuleHook) = unsafe { core::mem::transmute(attach) };
            attach(launched, module);
        }
    }
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerEnableDomain(_enable: u32, _subscriber: Handle, _domain: u32) -> u32 {
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerAddPatches(_image: *const c_void, _ctx: Handle) -> u32 {
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerPatchInstructions(_id: u32, _module: Handle, _name: *const c_char) -> u32 {
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerPatchModule(module: Handle) -> u32 {
    let mut patched = PATCHED.lock().unwrap_or_else(|e| e.into_inner());
    if !patched.contains(&(module as usize)) {
        patched.push(module as usize);
        log(&format!("patch {module:?}"));
    }
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerSetCallbackData(kernel: Handle, userdata: *const c_void) -> u32 {
    CALLBACK_DATA
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(kernel as usize, userdata as usize);
    OK
}

/// `sanitizerAlloc`: host memory stands for the device's.
///
/// # Safety
/// `ptr` is a valid out-pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerAlloc(_ctx: Handle, ptr: *mut *mut c_void, size: usize) -> u32 {
    unsafe { *ptr = libc::calloc(1, size) };
    OK
}

/// `sanitizerMemcpyDeviceToHost`.
///
/// # Safety
/// `dst` and `src` hold `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerMemcpyDeviceToHost(
    dst: *mut c_void,
    src: *mut c_void,
    count: usize,
    _stream: Handle,
) -> u32 {
    unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, count) };
    OK
}

/// `sanitizerMemcpyHostToDeviceAsync`.
///
/// # Safety
/// `dst` and `src` hold `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerMemcpyHostToDeviceAsync(
    dst: *mut c_void,
    src: *mut c_void,
    count: usize,
    _stream: Handle,
) -> u32 {
    if fails("sanitizerMemcpyHostToDeviceAsync") {
        return ERROR_UNKNOWN;
    }
    // SAFETY: the caller's promise; the stand-in's device memory is the process's own.
    unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, count) };
    OK
}

/// `sanitizerGetFunctionPcAndSize`: each function of each module gets code of its own.
///
/// # Safety
/// `name` is NUL-terminated; `pc` and `size` are valid out-pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerGetFunctionPcAndSize(
    module: Handle,
    name: *const c_char,
    pc: *mut u64,
    size: *mut u64,
) -> u32 {
    if fails("sanitizerGetFunctionPcAndSize") {
        return ERROR_UNKNOWN;
    }
    // SAFETY: the caller's promise.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    let mut functions = FUNCTIONS.lock().unwrap_or_else(|e| e.into_inner());
    let functions = functions.get_or_insert_with(HashMap::new);
    let next = FUNCTION_BYTES * (functions.len() as u64 + 1);
    let start = *functions.entry((module as usize, name)).or_insert(0x7000_0000_0000 + next);
    // SAFETY: the caller's promise.
    unsafe { (*pc, *size) = (start, FUNCTION_BYTES) };
    OK
}

/// `sanitizerMemset`.
///
/// # Safety
/// `ptr` holds `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerMemset(ptr: *mut c_void, value: i32, count: usize, _stream: Handle) -> u32 {
    if fails("sanitizerMemset") {
        return ERROR_UNKNOWN;
    }
    unsafe { core::ptr::write_bytes(ptr as *mut u8, value as u8, count) };
    OK
}

/// `SANITIZER_ERROR_UNKNOWN`.
const ERROR_UNKNOWN: u32 = 999;

/// Whether `STANDIN_SANITIZER_FAIL` (a comma-separated list of function names) names
/// `function`, which then fails with `SANITIZER_ERROR_UNKNOWN`, doing nothing.
fn fails(function: &str) -> bool {
    static FAIL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FAIL.get_or_init(|| {
        std::env::var("STANDIN_SANITIZER_FAIL").map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default()
    })
    .iter()
    .any(|f| f == function)
}

#[unsafe(no_mangle)]
pub extern "C" fn sanitizerStreamSynchronize(_stream: Handle) -> u32 {
    OK
}

/// `sanitizerGetStreamHandle`: the stream stands for its handle.
///
/// # Safety
/// `out` is a valid out-pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sanitizerGetStreamHandle(_ctx: Handle, stream: Handle, out: *mut Handle) -> u32 {
    if fails("sanitizerGetStreamHandle") {
        return ERROR_UNKNOWN;
    }
    unsafe { *out = stream };
    OK
}

/// The stand-in driver loaded `module` from `code` (`bytes` long), or, with no code, is
/// about to unload it: the subscriber hears of it, as from the real library.
unsafe extern "C" fn module(context: Handle, module: Handle, code: *const u8, bytes: usize) {
    let callback = CALLBACK.load(Ordering::Acquire);
    if callback == 0 {
        return;
    }
    let callback: Callback = unsafe { core::mem::transmute::<usize, Callback>(callback) };
    let data = ModuleData { context, module, cubin_size: bytes, cubin: code.cast(), library: core::ptr::null_mut() };
    let cbid = if code.is_null() {
        PATCHED.lock().unwrap_or_else(|e| e.into_inner()).retain(|&m| m != module as usize);
        10
    } else {
        9
    };
    // SAFETY: the subscriber's callback, with the resource domain's module data.
    unsafe { callback(core::ptr::null_mut(), 3, cbid, (&data as *const ModuleData).cast()) };
}

/// The stand-in driver accepted a launch of `function` in `module`. If the module is patched
/// and the function has a table (as on a GPU: `sanitizerSetCallbackData` binds it to every
/// later launch), the "device" adds to the table what the patch would (`emulate`, which like
/// the patch never clears what is there), each access marked early by the patch's rule
/// (`is_early`) at its program counter: a triple flagged [`BEFORE_WAIT`] is touched by the
/// function's first instruction, any other by its last. A kernel named `footprint_*` touches
/// what its parameters list as (address, length, flags) triples of u64 ([`accesses`]), a word
/// left over being a scalar that touches nothing; `footprint_beyond*` touches, for each triple,
/// the `length` bytes just after it (a footprint its parameters cannot tell from
/// `footprint_touch`'s); `footprint_packed(u32 length, u8 junk, u64 address, u64 flags)`
/// touches its one triple; `footprint_indirect(u64 base, u64 index)` reads the triple
/// (offset, length, flags) at `index` in device memory and touches `length` bytes at
/// `base + offset`.
unsafe extern "C" fn launched(
    function: Handle,
    module: Handle,
    _stream: Handle,
    name: *const c_char,
    params: *mut *mut c_void,
    sizes: *const usize,
    count: usize,
) {
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    if !PATCHED.lock().unwrap_or_else(|e| e.into_inner()).contains(&(module as usize)) {
        log(&format!("native {name}"));
        return;
    }
    let data = CALLBACK_DATA
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|d| d.get(&(function as usize)).copied())
        .unwrap_or(0);
    let (table, tagged, wide) =
        ((data & !(EARLY_TAG | WIDE_TAG)) as *mut c_void, data & EARLY_TAG != 0, data & WIDE_TAG != 0);
    if table.is_null() {
        log(&format!("patched {name}"));
        return;
    }
    log(&format!("measured {name}"));
    if !name.starts_with("footprint_") || params.is_null() {
        return;
    }
    let mut words = Vec::new();
    for i in 0..count {
        let (value, size) = unsafe { (*params.add(i) as *const u8, *sizes.add(i)) };
        for k in (0..size / 8).map(|k| k * 8) {
            words.push(unsafe { (value.add(k) as *const u64).read_unaligned() });
        }
    }
    if name.starts_with("footprint_packed") && count == 4 {
        // SAFETY: the launch's four parameters, as the kernel declares them.
        let (length, address, flags) =
            unsafe { (*(*params as *const u32), *(*params.add(2) as *const u64), *(*params.add(3) as *const u64)) };
        words = vec![address, u64::from(length), flags];
    }
    if name.starts_with("footprint_indirect") && words.len() == 2 {
        // SAFETY: the stand-in's device memory is the process's own; the index holds a triple.
        let index = unsafe { core::slice::from_raw_parts(words[1] as *const u64, 3) };
        words = vec![words[1], 24, 1, words[0] + index[0], index[1], index[2]];
    }
    if name.starts_with("footprint_beyond") {
        for t in words.chunks_exact_mut(3) {
            t[0] += t[1];
        }
    }
    // SAFETY: the table the engine gave this launch, a whole table of host memory here.
    let table = unsafe { core::slice::from_raw_parts_mut(table as *mut u8, table_bytes(wide)) };
    let start = FUNCTIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|f| f.get(&(module as usize, name)).copied());
    let early = |before: bool| {
        let pc = start.map(|start| if before { start } else { start + FUNCTION_BYTES - 16 });
        if pc.is_some_and(|pc| is_early(table, tagged, pc)) {
            EARLY
        } else {
            0
        }
    };
    let (before, after) = (early(true), early(false));
    let steps: Vec<(u64, u32, u32)> = accesses(&words)
        .into_iter()
        .map(|(addr, size, flags)| {
            let place = if flags & BEFORE_WAIT != 0 { before } else { after };
            (addr, size, flags & !BEFORE_WAIT | place)
        })
        .collect();
    emulate(table, &steps);
}

/// A triple's flag: its bytes are touched before the kernel's first grid-dependency wait.
const BEFORE_WAIT: u32 = 8;

/// The accesses a `footprint_*` kernel makes, as warp steps of at most 128 bytes within one
/// granule: for each (address, length, flags) triple (flags: the patch's READ 1, WRITE 2,
/// ATOMIC 4, and [`BEFORE_WAIT`]), `length` bytes from `address`; a length with bit 63 set
/// is `count << 32 | len` of a strided triple: `count` accesses of `len` bytes, `1 << shift`
/// bytes apart, the shift in bits 8 to 15 of the flags (0: 4 KiB).
fn accesses(words: &[u64]) -> Vec<(u64, u32, u32)> {
    let mut steps = Vec::new();
    for t in words.chunks_exact(3) {
        let (addr, length, flags) = (t[0], t[1], t[2] as u32 & 0xff);
        let pieces: Vec<(u64, u64)> = if length >> 63 == 1 {
            let (count, len) = ((length >> 32) & 0x7fff_ffff, length & 0xffff_ffff);
            let stride = match (t[2] >> 8) & 0xff {
                0 => 4096,
                shift => 1 << shift,
            };
            (0..count).map(|i| (addr + i * stride, len)).collect()
        } else {
            vec![(addr, length)]
        };
        for (mut at, len) in pieces {
            let end = at + len;
            while at < end {
                let granule_end = (at | ((1 << GRANULE_SHIFT) - 1)) + 1;
                let step = (end.min(granule_end) - at).min(128);
                steps.push((at, step as u32, flags));
                at += step;
            }
        }
    }
    steps
}
