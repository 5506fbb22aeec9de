//! Code: the names of kernel handles, which handles are `CUkernel`s, and when handles die.

use core::ffi::c_char;

use streamsan_driver_api::*;

use super::call::ok;
use super::kernels::{self, HandleKind};
use crate::intercept::variants::{real, Call};

pub unsafe fn module_get_function(
    _call: &Call,
    real: real::module_get_function,
    hfunc: *mut CUfunction,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    let status = unsafe { real(hfunc, module, name) };
    if ok(status) && !hfunc.is_null() {
        // SAFETY: the driver accepted `name` as a kernel name.
        unsafe { kernels::named_handle(*hfunc, name, HandleKind::Function, module) };
    }
    status
}

pub unsafe fn library_get_kernel(
    _call: &Call,
    real: real::library_get_kernel,
    kernel: *mut CUkernel,
    library: CUlibrary,
    name: *const c_char,
) -> CUresult {
    let status = unsafe { real(kernel, library, name) };
    if ok(status) && !kernel.is_null() {
        // SAFETY: the driver accepted `name` as a kernel name.
        unsafe { kernels::named_handle(*kernel, name, HandleKind::Kernel, library) };
    }
    status
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
