//! The real CUDA driver (`libcuda.so.1`, or `STREAMSAN_REAL_LIBCUDA`), opened on first need
//! and looked up with glibc's own `dlsym`, never the interposed one. The handle and every
//! resolved function are published with compare-and-swap: nothing here blocks or recurses.

use core::ffi::{c_char, c_uint, c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::ffi::CString;

use streamsan_driver_api::{
    CUcontext, CUdeviceptr, CUfunction, CUkernel, CUresult, CUstream, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_INITIALIZED,
    CUDA_SUCCESS,
};

use super::variants::{Call, Variant, VARIANTS, VARIANT_COUNT};

pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// glibc's `dlsym`. The interposed `dlsym` tail-calls through this slot, so it must be a
/// plain static that assembly can read.
pub static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// glibc's own `dlsym`, found once with `dlvsym` (glibc 2.34 and later export no
/// `__libc_dlsym`).
pub fn real_dlsym() -> Option<DlsymFn> {
    let mut found = REAL_DLSYM.load(Ordering::Acquire);
    if found == 0 {
        for version in [c"GLIBC_2.2.5", c"GLIBC_2.34"] {
            // SAFETY: dlvsym takes NUL-terminated strings; RTLD_NEXT skips the shim.
            found = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) } as usize;
            if found != 0 {
                break;
            }
        }
        REAL_DLSYM.store(found, Ordering::Release);
    }
    // SAFETY: a non-zero value is glibc's dlsym.
    (found != 0).then(|| unsafe { core::mem::transmute::<usize, DlsymFn>(found) })
}

/// Looks `name` up in `handle` with glibc's `dlsym`.
///
/// # Safety
/// `handle` is `RTLD_DEFAULT`, `RTLD_NEXT` or a handle `dlopen` returned and not closed.
pub unsafe fn lookup_in(handle: *mut c_void, name: &CStr) -> *mut c_void {
    match real_dlsym() {
        // SAFETY: a valid handle (the caller's promise) and a NUL-terminated name.
        Some(dlsym) => unsafe { dlsym(handle, name.as_ptr()) },
        None => core::ptr::null_mut(),
    }
}

static LIBRARY: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LOAD_FAILED: AtomicBool = AtomicBool::new(false);

/// The default name of the real driver.
const DRIVER: &CStr = c"libcuda.so.1";

/// `dlopen`s `path`; on failure, the loader's message.
fn open(path: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: a NUL-terminated path. RTLD_LOCAL: the driver adds nothing to the global
    // scope that the program did not ask for; a program that links or opens libcuda.so.1
    // itself gets this same object back.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if !handle.is_null() {
        return Ok(handle);
    }
    // SAFETY: dlerror returns a thread-local message or null.
    let why = unsafe { libc::dlerror() };
    Err(if why.is_null() {
        String::from("unknown error")
    } else {
        unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
    })
}

/// Opens the driver named by `STREAMSAN_REAL_LIBCUDA`, falling back to `libcuda.so.1`
/// (with one line on stderr) if that cannot be opened.
fn open_driver() -> Result<*mut c_void, String> {
    if let Some(path) = std::env::var_os("STREAMSAN_REAL_LIBCUDA") {
        let shown = path.to_string_lossy().into_owned();
        match CString::new(path.into_encoded_bytes()).map_err(|e| e.to_string()).and_then(|p| open(&p)) {
            Ok(handle) => return Ok(handle),
            Err(why) => super::diag::warn(&format!(
                "cannot load the CUDA driver named by STREAMSAN_REAL_LIBCUDA={shown} ({why}); using libcuda.so.1"
            )),
        }
    }
    open(DRIVER)
}

/// The real driver's handle, opening it on first use. `None`, with one line on stderr,
/// if it cannot be opened.
pub fn library() -> Option<*mut c_void> {
    let handle = LIBRARY.load(Ordering::Acquire);
    if !handle.is_null() {
        return Some(handle);
    }
    if LOAD_FAILED.load(Ordering::Relaxed) {
        return None;
    }
    let opened = match open_driver() {
        Ok(handle) => handle,
        Err(why) => {
            if !LOAD_FAILED.swap(true, Ordering::Relaxed) {
                super::diag::warn(&format!(
                    "cannot load the CUDA driver ({why}); CUDA calls fail as they would without a driver, and no race is detected"
                ));
            }
            return None;
        }
    };
    match LIBRARY.compare_exchange(core::ptr::null_mut(), opened, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(opened),
        Err(winner) => {
            // Another thread opened it first: give back our reference.
            // SAFETY: `opened` came from dlopen above.
            unsafe { libc::dlclose(opened) };
            Some(winner)
        }
    }
}

/// Looks `name` up in the real driver.
pub fn lookup(name: &CStr) -> *mut c_void {
    match library() {
        // SAFETY: the driver's handle, never closed.
        Some(handle) => unsafe { lookup_in(handle, name) },
        None => core::ptr::null_mut(),
    }
}

static REAL: [AtomicPtr<c_void>; VARIANT_COUNT] = [const { AtomicPtr::new(core::ptr::null_mut()) }; VARIANT_COUNT];

/// The real driver's function behind an exported name, resolved once.
#[inline]
pub fn real_function(variant: Variant) -> Option<*mut c_void> {
    resolved_once(&REAL[variant as usize], || lookup(VARIANTS[variant as usize].name))
}

/// The function in `slot`, else the one `lookup` finds, kept in `slot` if there is one.
#[inline]
pub fn resolved_once(slot: &AtomicPtr<c_void>, lookup: impl FnOnce() -> *mut c_void) -> Option<*mut c_void> {
    let f = slot.load(Ordering::Acquire);
    if !f.is_null() {
        return Some(f);
    }
    let f = lookup();
    if f.is_null() {
        return None;
    }
    slot.store(f, Ordering::Release);
    Some(f)
}

/// What a hook returns when the real driver lacks its function: the program reached a
/// name that the loaded driver does not export (it linked against a newer driver than
/// the one installed), or no driver could be loaded at all.
pub fn missing_function(call: &Call) -> CUresult {
    if library().is_none() {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    super::diag::warn(&format!(
        "the CUDA driver does not export {}; the call fails with CUDA_ERROR_NOT_FOUND",
        call.name()
    ));
    CUDA_ERROR_NOT_FOUND
}

/// Driver functions the shim calls for itself, to learn what the model needs: the current
/// context, a stream's context and flags, a kernel's name and parameter layout. None of
/// them is hooked. Each is `None` if the driver lacks it (`cuFuncGetParamInfo` is CUDA 12.4).
pub struct Queries {
    pub ctx_get_current: Option<unsafe extern "C" fn(*mut CUcontext) -> CUresult>,
    pub stream_get_ctx: Option<unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult>,
    pub stream_get_flags: Option<unsafe extern "C" fn(CUstream, *mut c_uint) -> CUresult>,
    pub stream_is_capturing: Option<unsafe extern "C" fn(CUstream, *mut c_uint) -> CUresult>,
    pub func_get_name: Option<unsafe extern "C" fn(*mut *const c_char, CUfunction) -> CUresult>,
    pub kernel_get_name: Option<unsafe extern "C" fn(*mut *const c_char, CUkernel) -> CUresult>,
    pub func_get_param_info: Option<unsafe extern "C" fn(CUfunction, usize, *mut usize, *mut usize) -> CUresult>,
    pub kernel_get_param_info: Option<unsafe extern "C" fn(CUkernel, usize, *mut usize, *mut usize) -> CUresult>,
    pub mem_get_address_range: Option<unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult>,
}

/// The query functions, resolved once.
pub fn queries() -> &'static Queries {
    streamsan::hot! { static QUERIES: std::sync::OnceLock<Queries> = std::sync::OnceLock::new(); }
    fn find<F: Copy>(name: &CStr) -> Option<F> {
        let f = lookup(name);
        // SAFETY: F is the driver's signature for `name` (cuda.h).
        (!f.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, F>(&f) })
    }
    QUERIES.get_or_init(|| Queries {
        ctx_get_current: find(c"cuCtxGetCurrent"),
        stream_get_ctx: find(c"cuStreamGetCtx"),
        stream_get_flags: find(c"cuStreamGetFlags"),
        stream_is_capturing: find(c"cuStreamIsCapturing"),
        func_get_name: find(c"cuFuncGetName"),
        kernel_get_name: find(c"cuKernelGetName"),
        func_get_param_info: find(c"cuFuncGetParamInfo"),
        kernel_get_param_info: find(c"cuKernelGetParamInfo"),
        mem_get_address_range: find(c"cuMemGetAddressRange_v2"),
    })
}

/// The size of the allocation that starts at `base`, if the driver can say.
pub fn allocation_size(base: CUdeviceptr) -> Option<u64> {
    let get = queries().mem_get_address_range?;
    let (mut start, mut size) = (0, 0usize);
    // SAFETY: valid out-pointers.
    let status = unsafe { get(&mut start, &mut size, base) };
    (status == CUDA_SUCCESS && start == base && size > 0).then_some(size as u64)
}

/// Whether `stream` may be capturing: true unless the driver says it is not (a stream that
/// joined a capture by waiting on a captured event is one before the model hears of it).
pub fn may_be_capturing(stream: u64) -> bool {
    let Some(is_capturing) = queries().stream_is_capturing else { return true };
    let mut status: c_uint = 1;
    // SAFETY: a valid out-pointer; the driver checks the handle.
    let answered = unsafe { is_capturing(stream as CUstream, &mut status) } == CUDA_SUCCESS;
    !answered || status != 0
}

/// The calling thread's current context (0 if none).
pub fn current_context() -> u64 {
    let mut ctx: CUcontext = core::ptr::null_mut();
    if let Some(get) = queries().ctx_get_current {
        // SAFETY: a valid out-pointer.
        unsafe { get(&mut ctx) };
    }
    ctx as u64
}
