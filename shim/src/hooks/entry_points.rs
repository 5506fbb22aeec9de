//! `cuGetProcAddress`: the third road into the driver (see [`crate::intercept::getproc`]).

use core::ffi::{c_char, c_int, c_void, CStr};
use streamsan_driver_api::{CUresult, CUDA_SUCCESS};

use crate::intercept::getproc;
use crate::intercept::variants::{real, Call};

/// Replaces the driver's answer with the hook of the same variant.
unsafe fn answer_with_hook(symbol: *const c_char, pfn: *mut *mut c_void, flags: u64) {
    if symbol.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: the driver wrote *pfn; symbol is the caller's NUL-terminated name.
    unsafe {
        if !(*pfn).is_null() {
            *pfn = getproc::hook_for(CStr::from_ptr(symbol).to_bytes(), *pfn, flags);
        }
    }
}

/// `cuGetProcAddress` (the 4-argument ABI of CUDA 11.3).
pub unsafe fn get_proc_address(
    _call: &Call,
    real: real::get_proc_address,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: the caller's arguments, unchanged.
    let status = unsafe { real(symbol, pfn, cuda_version, flags) };
    if status == CUDA_SUCCESS {
        unsafe { answer_with_hook(symbol, pfn, flags) };
    }
    status
}

/// `cuGetProcAddress_v2` (CUDA 12.0: adds the symbol status).
pub unsafe fn get_proc_address_v2(
    _call: &Call,
    real: real::get_proc_address_v2,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut u32,
) -> CUresult {
    // SAFETY: the caller's arguments, unchanged.
    let status = unsafe { real(symbol, pfn, cuda_version, flags, symbol_status) };
    if status == CUDA_SUCCESS {
        unsafe { answer_with_hook(symbol, pfn, flags) };
    }
    status
}
