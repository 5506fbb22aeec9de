//! Where a fake Compute Sanitizer library (`tests/standin-sanitizer`) attaches to the
//! stand-in, as the real one attaches to the driver: each module loaded or unloaded, with its
//! code, and each launch the stand-in accepts, with the kernel's name and parameters, are
//! reported to it, so that it can play the API's and the device's part of the footprint
//! engine. Nothing happens while none is attached.

use core::ffi::{c_char, c_void};
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::device::{state_read, Object};

/// `launch(function, module, stream, name, params, sizes, count)`: a launch the stand-in
/// accepted, of a kernel of `module` (its module or library), its parameters as the program
/// passed them (`params[i]` points at parameter `i`, of `sizes[i]` bytes).
pub type LaunchHook =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *const c_char, *mut *mut c_void, *const usize, usize);

/// `module(context, module, code, bytes)`: a module (or library) loaded with this code;
/// code null: it is about to be unloaded.
pub type ModuleHook = unsafe extern "C" fn(*mut c_void, *mut c_void, *const u8, usize);

static HOOK: AtomicUsize = AtomicUsize::new(0);
static MODULE_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Called by the fake sanitizer library when a tool subscribes.
#[unsafe(no_mangle)]
pub extern "C" fn standin_attach_sanitizer(hook: LaunchHook, module: ModuleHook) {
    HOOK.store(hook as usize, Ordering::Release);
    MODULE_HOOK.store(module as usize, Ordering::Release);
}

/// The module (or library) `handle` was loaded from `code` (or, None, is to be unloaded):
/// told to the attached library, if any.
pub fn module(handle: usize, code: Option<&[u8]>) {
    let hook = MODULE_HOOK.load(Ordering::Acquire);
    if hook == 0 {
        return;
    }
    // SAFETY: a hook the library attached; the code lives across the call.
    let hook: ModuleHook = unsafe { core::mem::transmute::<usize, ModuleHook>(hook) };
    let (ptr, len) = code.map_or((core::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    let ctx = crate::device::current_context() as *mut c_void;
    unsafe { hook(ctx, handle as *mut c_void, ptr, len) };
}

/// A launch of `f` on `stream` with `params`, accepted: told to the attached library, if any.
///
/// # Safety
/// `params` is null or holds one pointer per parameter of `f`, each to its value.
pub unsafe fn launched(f: *mut c_void, stream: *mut c_void, params: *mut *mut c_void) {
    let hook = HOOK.load(Ordering::Acquire);
    if hook == 0 {
        return;
    }
    let (entry, module) = match state_read().objects.get(&(f as usize)) {
        Some(Object::Function { entry, owner, .. } | Object::Kernel { entry, owner }) => (entry.clone(), *owner),
        _ => return,
    };
    let name = CString::new(entry.name).unwrap_or_default();
    let sizes: Vec<usize> = entry.params.iter().map(|p| p.size).collect();
    // SAFETY: a hook the library attached; the arguments live across the call.
    let hook: LaunchHook = unsafe { core::mem::transmute::<usize, LaunchHook>(hook) };
    unsafe { hook(f, module as *mut c_void, stream, name.as_ptr(), params, sizes.as_ptr(), sizes.len()) };
}
