//! `cuGetProcAddress` as the real driver answers it (see ../shared/INTERCEPTION.md):
//! a request names a base symbol (`cuMemcpyDtoH`), the CUDA version the caller was built
//! for, and flags; the answer is the newest exported variant that is not newer than that
//! version, its per-thread-default-stream form when flag 2 asks for it and one exists.
//! Unknown names get success and NULL; versions above the driver's get INVALID_VALUE.

use core::ffi::{c_char, c_int, c_void, CStr};

use streamsan_driver_api::*;

use crate::exports;

/// The stand-in reports itself as a CUDA 13.0 driver.
pub const DRIVER_VERSION: c_int = 13000;

/// The CUDA version that introduced each versioned name; unlisted names date from 2000.
const INTRODUCED: &[(&str, c_int)] = &[
    ("cuCtxCreate_v2", 3020),
    ("cuCtxCreate_v3", 11040),
    ("cuCtxCreate_v4", 12050),
    ("cuCtxDestroy_v2", 4000),
    ("cuCtxSynchronize_v2", 13000),
    ("cuCtxPopCurrent_v2", 4000),
    ("cuCtxPushCurrent_v2", 4000),
    ("cuDevicePrimaryCtxRelease_v2", 11000),
    ("cuDevicePrimaryCtxReset_v2", 11000),
    ("cuDeviceTotalMem_v2", 3020),
    ("cuMemHostRegister_v2", 6050),
    ("cuMemGetInfo_v2", 3020),
    ("cuStreamDestroy_v2", 4000),
    ("cuEventDestroy_v2", 4000),
    ("cuStreamBeginCapture_v2", 10010),
    ("cuStreamWaitValue32_v2", 11070),
    ("cuStreamWaitValue64_v2", 11070),
    ("cuStreamWriteValue32_v2", 11070),
    ("cuStreamWriteValue64_v2", 11070),
    ("cuStreamBatchMemOp_v2", 11070),
    ("cuGraphInstantiate_v2", 11000),
    ("cuGetProcAddress_v2", 12000),
    ("cuMemcpyBatchAsync_v2", 13000),
    ("cuMemcpy3DBatchAsync_v2", 13000),
];

/// Per-thread variants appeared with CUDA 7.0.
const PER_THREAD_INTRODUCED: c_int = 7000;

fn introduced(name: &str) -> c_int {
    let base = name.trim_end_matches("_ptsz").trim_end_matches("_ptds");
    let version = INTRODUCED.iter().find(|(n, _)| *n == base).map(|&(_, v)| v).unwrap_or_else(|| {
        // The 64-bit `_v2` entry points of CUDA 3.2.
        if base.ends_with("_v2") {
            3020
        } else {
            2000
        }
    });
    if is_per_thread_name(name) {
        version.max(PER_THREAD_INTRODUCED)
    } else {
        version
    }
}

/// `cuMemcpyDtoH_v2_ptds` -> `cuMemcpyDtoH`.
fn base_name(name: &str) -> &str {
    let name = name.trim_end_matches("_ptsz").trim_end_matches("_ptds");
    match name.rfind("_v") {
        Some(at) if name[at + 2..].chars().all(|c| c.is_ascii_digit()) && at + 2 < name.len() => &name[..at],
        _ => name,
    }
}

/// Answers one request; `status` may be null (the 4-argument ABI).
pub unsafe fn get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut u32,
) -> CUresult {
    if pfn.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let set = |f: *mut c_void, s: u32| unsafe {
        *pfn = f;
        if !status.is_null() {
            *status = s;
        }
    };
    if cuda_version > DRIVER_VERSION {
        set(core::ptr::null_mut(), CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        return CUDA_ERROR_INVALID_VALUE;
    }
    let symbol = if symbol.is_null() { "" } else { unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("") };
    let per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0;
    let candidates: Vec<&(&str, *const ())> =
        exports::all().iter().filter(|(name, _)| !symbol.is_empty() && base_name(name) == symbol).collect();
    if candidates.is_empty() {
        set(core::ptr::null_mut(), CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        return CUDA_SUCCESS;
    }
    let has_per_thread = candidates.iter().any(|(name, _)| is_per_thread_name(name));
    let chosen = candidates
        .iter()
        .filter(|(name, _)| is_per_thread_name(name) == (per_thread && has_per_thread))
        .filter(|(name, _)| introduced(name) <= cuda_version)
        .max_by_key(|(name, _)| introduced(name));
    match chosen {
        Some((_, f)) => set(*f as *mut c_void, CU_GET_PROC_ADDRESS_SUCCESS),
        None => set(core::ptr::null_mut(), CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT),
    }
    CUDA_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names_and_versions() {
        assert_eq!(base_name("cuMemcpyDtoH_v2_ptds"), "cuMemcpyDtoH");
        assert_eq!(base_name("cuLaunchKernel_ptsz"), "cuLaunchKernel");
        assert_eq!(introduced("cuCtxCreate_v4"), 12050);
        assert_eq!(introduced("cuLaunchKernel_ptsz"), 7000);
        assert_eq!(introduced("cuMemcpyDtoHAsync_v2"), 3020);
    }
}
