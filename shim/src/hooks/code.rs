//! Code: the names of kernel handles, which handles are `CUkernel`s, and when handles die.

use core::ffi::c_char;

use streamsan_driver_api::*;

use super::call::ok;
use super::kernels::{self, HandleKind};
use crate::intercept::variants::{real, Call};

/// A kernel handle the driver found by `name` in `code` (a module or a library), told if
/// the driver succeeded.
unsafe fn found(
    status: CUresult,
    out: *mut *mut c_void,
    name: *const c_char,
    kind: HandleKind,
    code: *mut c_void,
) -> CUresult {
    if ok(status) && !out.is_null() {
        // SAFETY: the driver accepted `name` as a kernel name.
        unsafe { kernels::named_handle(*out, name, kind, code) };
    }
    status
}

pub unsafe fn module_get_function(
    _call: &Call,
    real: real::module_get_function,
    hfunc: *mut CUfunction,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    unsafe { found(real(hfunc, module, name), hfunc, name, HandleKind::Function, module) }
}

pub unsafe fn library_get_kernel(
    _call: &Call,
    real: real::library_get_kernel,
    kernel: *mut CUkernel,
    library: CUlibrary,
    name: *const c_char,
) -> CUresult {
    unsafe { found(real(kernel, library, name), kernel, name, HandleKind::Kernel, library) }
}

pub unsafe fn kernel_get_function(
    _call: &Call,
    real: real::kernel_get_function,
    func: *mut CUfunction,
    kernel: CUkernel,
) -> CUresult {
    let status = unsafe { real(func, kernel) };
    if ok(status) && !func.is_null() {
        kernels::function_of_kernel(unsafe { *func }, kernel);
    }
    status
}

pub unsafe fn module_unload(_call: &Call, real: real::module_unload, module: CUmodule) -> CUresult {
    let status = unsafe { real(module) };
    if ok(status) {
        kernels::code_unloaded(Some(module));
    }
    status
}

pub unsafe fn library_unload(_call: &Call, real: real::library_unload, library: CUlibrary) -> CUresult {
    let status = unsafe { real(library) };
    if ok(status) {
        kernels::code_unloaded(Some(library));
    }
    status
}
