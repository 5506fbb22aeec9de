//! Code: the names of kernel handles, which handles are `CUkernel`s, when handles die, and,
//! with the host guard on, what PTX loaded says of its kernels' channels to the host.

use core::ffi::{c_char, CStr};

use streamsan_driver_api::*;

use super::call::ok;
use super::kernels::{self, HandleKind};
use crate::host_races;
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

/// The text of an image the driver loaded, if it is PTX: not a cubin (ELF), a fatbinary or a
/// fatbinary's wrapper.
///
/// # Safety
/// `image` is an image the driver accepted: a cubin, a fatbinary or NUL-terminated PTX.
unsafe fn ptx_text<'a>(image: *const c_void) -> Option<&'a [u8]> {
    if image.is_null() {
        return None;
    }
    // SAFETY: every image the driver accepts is longer than four bytes.
    let head = unsafe { core::slice::from_raw_parts(image.cast::<u8>(), 4) };
    let binary = [b"\x7fELF", &0xba55_ed50u32.to_le_bytes(), &0x4662_43b1u32.to_le_bytes()];
    if binary.iter().any(|magic| head == *magic) || !head.iter().all(|b| b.is_ascii()) {
        return None;
    }
    // SAFETY: neither binary format: PTX text, which the driver reads to its NUL.
    Some(unsafe { CStr::from_ptr(image.cast()) }.to_bytes())
}

/// The module or library `out` was loaded from `image`, told if the driver succeeded.
unsafe fn loaded(status: CUresult, out: *mut *mut c_void, image: *const c_void) -> CUresult {
    if ok(status) && !out.is_null() && host_races::enabled() {
        // SAFETY: the driver accepted `image` and wrote the handle.
        let (owner, text) = unsafe { (*out, ptx_text(image)) };
        kernels::code_loaded(owner, text.unwrap_or_default());
    }
    status
}

pub unsafe fn module_load_data(
    _call: &Call,
    real: real::module_load_data,
    module: *mut CUmodule,
    image: *const c_void,
) -> CUresult {
    unsafe { loaded(real(module, image), module, image) }
}

pub unsafe fn module_load_data_ex(
    _call: &Call,
    real: real::module_load_data_ex,
    module: *mut CUmodule,
    image: *const c_void,
    num_options: c_uint,
    options: *mut u32,
    option_values: *mut *mut c_void,
) -> CUresult {
    unsafe { loaded(real(module, image, num_options, options, option_values), module, image) }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn library_load_data(
    _call: &Call,
    real: real::library_load_data,
    library: *mut CUlibrary,
    code: *const c_void,
    jit_options: *mut u32,
    jit_option_values: *mut *mut c_void,
    num_jit_options: c_uint,
    library_options: *mut u32,
    library_option_values: *mut *mut c_void,
    num_library_options: c_uint,
) -> CUresult {
    let status = unsafe {
        real(
            library,
            code,
            jit_options,
            jit_option_values,
            num_jit_options,
            library_options,
            library_option_values,
            num_library_options,
        )
    };
    unsafe { loaded(status, library, code) }
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
