//! Driver functions outside the hooked table that programs and the shim call: current
//! context, devices, kernel parameter layouts and names, a library's kernels enumerated,
//! stream properties, a green context's streams, error strings.
//! Like the table's entry points they are logged and can be made to fail.
//!
//! Kernel queries behave as observed on driver 580: `cuFuncGet*` on a `CUkernel` handle and
//! `cuKernelGet*` on a `CUfunction` fail with CUDA_ERROR_INVALID_HANDLE, and an index past
//! the last parameter gives CUDA_ERROR_INVALID_VALUE.

use core::ffi::CStr;
use std::ffi::CString;

use streamsan_driver_api::*;

use crate::device::{self, state, state_read, MemoryKind, Object};
use crate::ptx::Entry;

const OK: CUresult = CUDA_SUCCESS;

unsafe fn put<T>(out: *mut T, value: T) -> CUresult {
    if out.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { out.write(value) };
    OK
}

fn function_entry(f: usize) -> Option<Entry> {
    match state_read().objects.get(&f) {
        Some(Object::Function { entry, .. }) => Some(entry.clone()),
        _ => None,
    }
}

fn kernel_entry(k: usize) -> Option<Entry> {
    match state_read().objects.get(&k) {
        Some(Object::Kernel { entry, .. }) => Some(entry.clone()),
        _ => None,
    }
}

unsafe fn param_info(entry: Option<Entry>, index: usize, offset: *mut usize, size: *mut usize) -> CUresult {
    let Some(entry) = entry else { return CUDA_ERROR_INVALID_HANDLE };
    let Some(param) = entry.params.get(index) else { return CUDA_ERROR_INVALID_VALUE };
    unsafe {
        let _ = put(offset, param.offset);
        put(size, param.size)
    }
}

unsafe fn name_of(entry: Option<Entry>, out: *mut *const c_char) -> CUresult {
    let Some(entry) = entry else { return CUDA_ERROR_INVALID_HANDLE };
    // The driver's names live as long as the module: leaking one per query is the stand-in's version.
    let name = CString::new(entry.name).unwrap_or_default().into_raw();
    unsafe { put(out, name.cast_const()) }
}

fn stream_property(stream: CUstream) -> Option<(usize, u32, i32)> {
    match state_read().objects.get(&(stream as usize)) {
        Some(Object::Stream { ctx, flags, priority, .. }) => Some((*ctx, *flags, *priority)),
        _ => None,
    }
}

const ERROR_NAMES: &[(CUresult, &CStr)] = &[
    (0, c"CUDA_SUCCESS"),
    (1, c"CUDA_ERROR_INVALID_VALUE"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED"),
    (101, c"CUDA_ERROR_INVALID_DEVICE"),
    (201, c"CUDA_ERROR_INVALID_CONTEXT"),
    (400, c"CUDA_ERROR_INVALID_HANDLE"),
    (500, c"CUDA_ERROR_NOT_FOUND"),
    (600, c"CUDA_ERROR_NOT_READY"),
];

/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: a launch asking for more dynamic
/// shared memory than 48 KiB fails unless its function's attribute allows it.
pub const MAX_DYNAMIC_SHARED: u32 = 8;

/// Attributes set with `cuFuncSetAttribute`, by (function, attribute); the others are 0.
static FUNC_ATTRIBUTES: std::sync::Mutex<std::collections::BTreeMap<(usize, u32), i32>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// A function's attribute, as set (0 if never).
pub fn func_attribute(function: usize, attribute: u32) -> i32 {
    FUNC_ATTRIBUTES.lock().unwrap_or_else(|e| e.into_inner()).get(&(function, attribute)).copied().unwrap_or(0)
}

macro_rules! queries {
    ($( fn $name:ident($($arg:ident : $ty:ty),*) $body:block )*) => {
        $(
            #[unsafe(no_mangle)]
            #[allow(non_snake_case, unused_unsafe)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                crate::log::call(stringify!($name), || vec![$((stringify!($arg), $arg.repr())),*], || unsafe { $body })
            }
        )*

        /// Every query export, for `cuGetProcAddress`.
        pub static QUERIES: &[(&str, crate::exports::Address)] = &[$((stringify!($name), crate::exports::Address($name as *const ()))),*];
    };
}

queries! {
    fn cuDriverGetVersion(version: *mut c_int) { put(version, crate::getproc::DRIVER_VERSION) }
    fn cuDeviceGetCount(count: *mut c_int) { put(count, device::device_count()) }
    fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) {
        if ordinal < 0 || ordinal >= device::device_count() { 101 } else { put(dev, ordinal) }
    }
    fn cuDeviceGetAttribute(value: *mut c_int, attribute: u32, dev: CUdevice) {
        let _ = (attribute, dev);
        // Every capability the stand-in is asked about is present, memory pools included.
        put(value, 1)
    }
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) {
        let text = format!("streamsan stand-in {dev}\0");
        if name.is_null() || len <= 0 { return CUDA_ERROR_INVALID_VALUE; }
        let n = text.len().min(len as usize);
        core::ptr::copy_nonoverlapping(text.as_ptr(), name.cast(), n);
        *name.add(n - 1) = 0;
        OK
    }
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) { let _ = dev; put(bytes, 16 << 30) }
    fn cuDeviceCanAccessPeer(can: *mut c_int, dev: CUdevice, peer: CUdevice) { let _ = (dev, peer); put(can, 1) }
    fn cuCtxEnablePeerAccess(ctx: CUcontext, flags: c_uint) { let _ = (ctx, flags); OK }
    fn cuCtxGetCurrent(pctx: *mut CUcontext) { put(pctx, device::current_context() as CUcontext) }
    fn cuCtxSetCurrent(ctx: CUcontext) { device::set_current_context(ctx as usize); OK }
    fn cuCtxPushCurrent_v2(ctx: CUcontext) { device::push_context(ctx as usize); OK }
    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) {
        let ctx = device::pop_context();
        if !pctx.is_null() { *pctx = ctx as CUcontext; }
        OK
    }
    fn cuCtxGetDevice(dev: *mut CUdevice) {
        match state_read().device_of(device::current_context()) {
            Some(d) => put(dev, d),
            None => CUDA_ERROR_INVALID_CONTEXT,
        }
    }
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) {
        if !least.is_null() { *least = 0; }
        if !greatest.is_null() { *greatest = -5; }
        OK
    }
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) {
        let _ = put(free, 8 << 30);
        put(total, 16 << 30)
    }
    fn cuPointerGetAttribute(data: *mut c_void, attribute: u32, ptr: CUdeviceptr) {
        // CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2) is the one asked about.
        match (attribute, crate::behaviour::memory_kind(ptr)) {
            (2, Some(MemoryKind::Device | MemoryKind::Managed)) => put(data.cast::<u32>(), CU_MEMORYTYPE_DEVICE),
            (2, Some(MemoryKind::Host)) => put(data.cast::<u32>(), CU_MEMORYTYPE_HOST),
            _ => CUDA_ERROR_INVALID_VALUE,
        }
    }
    fn cuFuncGetParamInfo(func: CUfunction, index: usize, offset: *mut usize, size: *mut usize) {
        param_info(function_entry(func as usize), index, offset, size)
    }
    fn cuKernelGetParamInfo(kernel: CUkernel, index: usize, offset: *mut usize, size: *mut usize) {
        param_info(kernel_entry(kernel as usize), index, offset, size)
    }
    fn cuFuncGetName(name: *mut *const c_char, func: CUfunction) { name_of(function_entry(func as usize), name) }
    fn cuFuncGetModule(hmod: *mut CUmodule, func: CUfunction) {
        match state_read().objects.get(&(func as usize)) {
            Some(Object::Function { owner, .. }) => put(hmod, *owner as CUmodule),
            _ => CUDA_ERROR_INVALID_HANDLE,
        }
    }
    fn cuKernelGetName(name: *mut *const c_char, kernel: CUkernel) { name_of(kernel_entry(kernel as usize), name) }
    fn cuModuleGetGlobal_v2(dptr: *mut CUdeviceptr, bytes: *mut usize, module: CUmodule, name: *const c_char) {
        let name = if name.is_null() { String::new() } else { CStr::from_ptr(name).to_string_lossy().into_owned() };
        let found = match state_read().objects.get(&(module as usize)) {
            Some(Object::Module { variables, .. }) => variables.get(&name).copied(),
            _ => return CUDA_ERROR_INVALID_HANDLE,
        };
        match found {
            Some((address, size)) => {
                if !bytes.is_null() {
                    put(bytes, size);
                }
                if dptr.is_null() { OK } else { put(dptr, address) }
            }
            None => CUDA_ERROR_NOT_FOUND,
        }
    }
    fn cuFuncGetAttribute(value: *mut c_int, attribute: u32, func: CUfunction) {
        match function_entry(func as usize).or_else(|| kernel_entry(func as usize)) {
            Some(_) => put(value, func_attribute(func as usize, attribute)),
            None => CUDA_ERROR_INVALID_HANDLE,
        }
    }
    fn cuFuncSetAttribute(func: CUfunction, attribute: u32, value: c_int) {
        match function_entry(func as usize).or_else(|| kernel_entry(func as usize)) {
            Some(_) => {
                FUNC_ATTRIBUTES.lock().unwrap_or_else(|e| e.into_inner()).insert((func as usize, attribute), value);
                OK
            }
            None => CUDA_ERROR_INVALID_HANDLE,
        }
    }
    // A library's kernels without their names (CUDA 12.4): handles the shim does not see
    // handed out, which it learns from the driver's queries.
    fn cuLibraryGetKernelCount(count: *mut c_uint, library: CUlibrary) {
        match state_read().objects.get(&(library as usize)) {
            Some(Object::Library { kernels }) => put(count, kernels.len() as c_uint),
            _ => CUDA_ERROR_INVALID_HANDLE,
        }
    }
    fn cuLibraryEnumerateKernels(kernels: *mut CUkernel, count: c_uint, library: CUlibrary) {
        let mut entries: Vec<(String, Entry)> = match state_read().objects.get(&(library as usize)) {
            Some(Object::Library { kernels }) => kernels.iter().map(|(n, e)| (n.clone(), e.clone())).collect(),
            _ => return CUDA_ERROR_INVALID_HANDLE,
        };
        if kernels.is_null() || (count as usize) < entries.len() { return CUDA_ERROR_INVALID_VALUE; }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut s = state();
        for (i, (_, entry)) in entries.into_iter().enumerate() {
            *kernels.add(i) = s.new_handle(Object::Kernel { entry, owner: library as usize }) as CUkernel;
        }
        OK
    }
    // A stream of a green context (CUDA 12.4), which the shim does not hook: always
    // non-blocking. The stand-in has no green contexts: the stream is the current context's.
    fn cuGreenCtxStreamCreate(stream: *mut CUstream, green: *mut c_void, flags: c_uint, priority: c_int) {
        let _ = green;
        let ctx = device::current_context();
        if flags & CU_STREAM_NON_BLOCKING == 0 { return CUDA_ERROR_INVALID_VALUE; }
        put(stream, state().new_handle(Object::Stream { ctx, flags, priority, capturing: false }) as CUstream)
    }
    fn cuStreamGetCtx(stream: CUstream, pctx: *mut CUcontext) {
        match stream as usize {
            0 | CU_STREAM_LEGACY | CU_STREAM_PER_THREAD => put(pctx, device::current_context() as CUcontext),
            _ => match stream_property(stream) {
                Some((ctx, _, _)) => put(pctx, ctx as CUcontext),
                None => CUDA_ERROR_INVALID_HANDLE,
            },
        }
    }
    fn cuStreamGetFlags(stream: CUstream, flags: *mut c_uint) {
        match stream as usize {
            0 | CU_STREAM_LEGACY | CU_STREAM_PER_THREAD => put(flags, 0),
            _ => match stream_property(stream) {
                Some((_, f, _)) => put(flags, f),
                None => CUDA_ERROR_INVALID_HANDLE,
            },
        }
    }
    fn cuStreamGetPriority(stream: CUstream, priority: *mut c_int) {
        put(priority, stream_property(stream).map_or(0, |(_, _, p)| p))
    }
    fn cuStreamIsCapturing(stream: CUstream, status: *mut u32) {
        let capturing = matches!(state_read().objects.get(&(stream as usize)), Some(Object::Stream { capturing: true, .. }));
        put(status, capturing as u32)
    }
    // A graph's nodes in the order they were made (the driver's order), and a kernel node's
    // parameters ([`crate::graphs`]).
    fn cuGraphGetNodes(graph: CUgraph, nodes: *mut CUgraphNode, count: *mut usize) {
        if count.is_null() { return CUDA_ERROR_INVALID_VALUE; }
        if crate::behaviour::check_graph(graph) != OK { return CUDA_ERROR_INVALID_HANDLE; }
        let all = crate::graphs::nodes(graph);
        if !nodes.is_null() {
            for (i, &n) in all.iter().take(*count).enumerate() { *nodes.add(i) = n as CUgraphNode; }
        }
        put(count, if nodes.is_null() { all.len() } else { all.len().min(*count) })
    }
    fn cuGraphKernelNodeGetParams_v2(node: CUgraphNode, params: *mut KernelNodeParams) {
        if params.is_null() { return CUDA_ERROR_INVALID_VALUE; }
        if crate::graphs::get_params(node as usize, params) { OK } else { CUDA_ERROR_INVALID_VALUE }
    }
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent) { let _ = (start, end); put(ms, 0.0) }
    fn cuDeviceGetDefaultMemPool(pool: *mut CUmemoryPool, dev: CUdevice) {
        if dev < 0 || dev >= device::device_count() { return 101; }
        // One pool per device, named by a handle of its own.
        let handle = state().default_pool(dev);
        put(pool, handle as CUmemoryPool)
    }
    // Virtual memory management: a reserved range is real stand-in memory, so that what is
    // mapped there can be copied and set.
    fn cuMemGetAllocationGranularity(granularity: *mut usize, prop: *const c_void, option: u32) {
        let _ = (prop, option);
        put(granularity, 2 << 20)
    }
    fn cuMemAddressReserve(ptr: *mut CUdeviceptr, size: usize, alignment: usize, addr: CUdeviceptr, flags: u64) {
        let _ = (alignment, addr, flags);
        match state().alloc_device(size as u64) {
            Some(base) => put(ptr, base),
            None => 2,
        }
    }
    fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) {
        let _ = size;
        if state().free_device(ptr) { OK } else { CUDA_ERROR_INVALID_VALUE }
    }
    fn cuMemSetAccess(ptr: CUdeviceptr, size: usize, desc: *const c_void, count: usize) {
        let _ = (ptr, size);
        if desc.is_null() || count == 0 { CUDA_ERROR_INVALID_VALUE } else { OK }
    }
    // Managed-memory hints and stream attributes: accepted, and nothing to do without a device.
    fn cuMemPrefetchAsync_v2(ptr: CUdeviceptr, count: usize, location: u64, flags: c_uint, stream: CUstream) {
        let _ = (ptr, count, location, flags);
        crate::behaviour::check_stream(stream)
    }
    fn cuMemAdvise_v2(ptr: CUdeviceptr, count: usize, advice: u32, location: u64) {
        let _ = (ptr, count, advice, location);
        OK
    }
    fn cuStreamAttachMemAsync(stream: CUstream, ptr: CUdeviceptr, length: usize, flags: c_uint) {
        let _ = (ptr, length, flags);
        crate::behaviour::check_stream(stream)
    }
    fn cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut usize, ptr: CUdeviceptr) {
        let found = state_read().allocations.range(..=ptr).next_back().map(|(&b, a)| (b, a.size)).filter(|&(b, s)| ptr < b + s.max(1));
        match found {
            Some((b, s)) => {
                if !base.is_null() { *base = b; }
                if !size.is_null() { *size = s as usize; }
                OK
            }
            None => 1, // CUDA_ERROR_INVALID_VALUE
        }
    }
    fn cuImportExternalSemaphore(sem: *mut CUexternalSemaphore, desc: *const c_void) {
        if desc.is_null() { return CUDA_ERROR_INVALID_VALUE; }
        let handle = state().new_handle(Object::ExternalSemaphore);
        put(sem, handle as CUexternalSemaphore)
    }
    fn cuDestroyExternalSemaphore(sem: CUexternalSemaphore) {
        match state().objects.remove(&(sem as usize)) {
            Some(Object::ExternalSemaphore) => OK,
            _ => CUDA_ERROR_INVALID_HANDLE,
        }
    }
    fn cuGetErrorName(code: CUresult, out: *mut *const c_char) {
        match ERROR_NAMES.iter().find(|(c, _)| *c == code) {
            Some((_, name)) => put(out, name.as_ptr()),
            None => CUDA_ERROR_INVALID_VALUE,
        }
    }
    fn cuGetErrorString(code: CUresult, out: *mut *const c_char) {
        match ERROR_NAMES.iter().find(|(c, _)| *c == code) {
            Some((_, name)) => put(out, name.as_ptr()),
            None => CUDA_ERROR_INVALID_VALUE,
        }
    }
}
