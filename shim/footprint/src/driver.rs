//! The driver's functions the engine makes and runs twins with: the real ones, never the
//! shim's hooks, so that nothing the engine does reaches the model.

use core::ffi::{c_char, c_void};

use crate::api::Handle;

/// The driver's functions, as `cuda.h` declares them.
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
    pub mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> u32,
    pub mem_free: unsafe extern "C" fn(u64) -> u32,
    pub memset_d8_async: unsafe extern "C" fn(u64, u8, usize, Handle) -> u32,
    pub stream_create: unsafe extern "C" fn(*mut Handle, u32) -> u32,
    pub stream_synchronize: unsafe extern "C" fn(Handle) -> u32,
    pub stream_destroy: unsafe extern "C" fn(Handle) -> u32,
    pub launch_kernel: unsafe extern "C" fn(
        Handle,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        Handle,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> u32,
}
