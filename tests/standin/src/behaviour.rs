//! What each table entry point does in the stand-in. One function per family, named as in
//! the table; arguments arrive exactly as the program (through the shim) passed them.
//!
//! The stand-in orders nothing: copies and memsets happen at once, but for asynchronous
//! copies with a side in pinned memory, which complete at the program's next wait
//! ([`crate::pinned`]); host functions run inside the call that enqueues them. For
//! benchmarks, launches may take device time that synchronizes wait for
//! ([`crate::device_time`]).

use core::ffi::CStr;
use std::collections::HashMap;

use streamsan_driver_api::*;

use crate::device::{self, state, state_read, MemoryKind, Object};
use crate::device_time;
use crate::getproc;
use crate::graphs;
use crate::pinned;
use crate::ptx;

const OK: CUresult = CUDA_SUCCESS;

unsafe fn write<T>(out: *mut T, value: T) -> CUresult {
    if out.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { out.write(value) };
    OK
}

fn is_stream_handle(stream: CUstream) -> bool {
    let s = stream as usize;
    s == 0
        || s == CU_STREAM_LEGACY
        || s == CU_STREAM_PER_THREAD
        || matches!(state_read().objects.get(&s), Some(Object::Stream { .. }))
}

pub fn check_stream(stream: CUstream) -> CUresult {
    if is_stream_handle(stream) {
        OK
    } else {
        CUDA_ERROR_INVALID_HANDLE
    }
}

fn check(handle: *mut c_void, is: impl Fn(&Object) -> bool) -> CUresult {
    match state_read().objects.get(&(handle as usize)) {
        Some(o) if is(o) => OK,
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

fn new_object(out: *mut *mut c_void, object: Object) -> CUresult {
    let handle = state().new_handle(object);
    unsafe { write(out, handle as *mut c_void) }
}

/// Copies `len` bytes when at least one side of the copy is stand-in memory.
unsafe fn move_bytes(dst: u64, src: u64, len: usize) {
    let s = state();
    let dst_known = s.is_allocated(dst, len as u64);
    let src_known = s.is_allocated(src, len as u64);
    drop(s);
    // A side that is not stand-in memory is taken to be the program's host memory, but only
    // when the other side is stand-in memory: sentinel addresses are never touched.
    if len > 0 && (dst_known || src_known) && dst != 0 && src != 0 {
        if dst_known && src_known {
            // SAFETY: both sides are ours. Pinned memory is reached as the device reaches it,
            // whatever its protection.
            unsafe { core::ptr::copy(pinned::device_view(src) as *const u8, pinned::device_view(dst) as *mut u8, len) };
        } else {
            // The program's own host memory (registered, or pageable): reached through
            // /proc/self/mem, as a device's DMA reaches it, whatever a tool's page protection.
            let mem =
                std::fs::OpenOptions::new().read(true).write(true).open("/proc/self/mem").expect("/proc/self/mem");
            let mut bytes = vec![0u8; len];
            if src_known {
                // SAFETY: stand-in memory of `len` bytes (checked above).
                unsafe { core::ptr::copy(pinned::device_view(src) as *const u8, bytes.as_mut_ptr(), len) };
                std::os::unix::fs::FileExt::write_all_at(&mem, &bytes, dst)
                    .expect("write to the program's host memory");
            } else {
                std::os::unix::fs::FileExt::read_exact_at(&mem, &mut bytes, src)
                    .expect("read the program's host memory");
                // SAFETY: stand-in memory of `len` bytes (checked above).
                unsafe { core::ptr::copy(bytes.as_ptr(), pinned::device_view(dst) as *mut u8, len) };
            }
        }
    }
}

unsafe fn fill<T: Copy>(dst: u64, pitch: usize, value: T, width: usize, height: usize) {
    let elem = core::mem::size_of::<T>();
    let row_bytes = (width * elem) as u64;
    let span = if height == 0 { 0 } else { pitch as u64 * (height as u64 - 1) + row_bytes };
    if !state().is_allocated(dst, span) {
        return;
    }
    let dst = pinned::device_view(dst);
    for row in 0..height {
        let base = dst as usize + row * pitch;
        for i in 0..width {
            // SAFETY: inside stand-in memory (checked above).
            unsafe { ((base + i * elem) as *mut T).write_unaligned(value) };
        }
    }
}

// ---- Initialisation and contexts --------------------------------------------------------

pub unsafe fn init(_flags: c_uint) -> CUresult {
    OK
}

unsafe fn create_context(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    if dev < 0 || dev >= device::device_count() {
        return 101; // CUDA_ERROR_INVALID_DEVICE
    }
    let ctx = state().new_handle(Object::Context { device: dev });
    device::push_context(ctx);
    unsafe { write(pctx, ctx as CUcontext) }
}

pub unsafe fn ctx_create(pctx: *mut CUcontext, _flags: c_uint, dev: CUdevice) -> CUresult {
    unsafe { create_context(pctx, dev) }
}
pub unsafe fn ctx_create_v3(pctx: *mut CUcontext, _p: *mut c_void, _n: c_int, _f: c_uint, dev: CUdevice) -> CUresult {
    unsafe { create_context(pctx, dev) }
}
pub unsafe fn ctx_create_v4(pctx: *mut CUcontext, _p: *mut c_void, _f: c_uint, dev: CUdevice) -> CUresult {
    unsafe { create_context(pctx, dev) }
}
pub unsafe fn ctx_destroy(ctx: CUcontext) -> CUresult {
    pinned::complete();
    let status = check(ctx, |o| matches!(o, Object::Context { .. }));
    if status == OK && device::current_context() == ctx as usize {
        device::pop_context();
    }
    status
}
pub unsafe fn ctx_synchronize() -> CUresult {
    synchronized();
    if device::current_context() == 0 {
        CUDA_ERROR_INVALID_CONTEXT
    } else {
        OK
    }
}
pub unsafe fn ctx_synchronize_v2(_ctx: CUcontext) -> CUresult {
    synchronized();
    OK
}
pub unsafe fn primary_ctx_retain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    if dev < 0 || dev >= device::device_count() {
        return 101;
    }
    let ctx = state().primary_context(dev);
    unsafe { write(pctx, ctx as CUcontext) }
}
pub unsafe fn primary_ctx_release(_dev: CUdevice) -> CUresult {
    OK
}
pub unsafe fn primary_ctx_reset(_dev: CUdevice) -> CUresult {
    OK
}

// ---- Allocation -------------------------------------------------------------------------

unsafe fn device_alloc(dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    if dptr.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match state().alloc_device(size as u64) {
        Some(addr) => unsafe { write(dptr, addr) },
        None => 2, // CUDA_ERROR_OUT_OF_MEMORY
    }
}

unsafe fn host_alloc(pp: *mut *mut c_void, size: usize) -> CUresult {
    if pp.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match state().alloc_host(size as u64) {
        Some(addr) => unsafe { write(pp, addr as *mut c_void) },
        None => 2,
    }
}

pub unsafe fn mem_alloc(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    unsafe { device_alloc(dptr, bytesize) }
}
pub unsafe fn mem_alloc_pitch(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    _elem: c_uint,
) -> CUresult {
    let row = width.div_ceil(512) * 512;
    let status = unsafe { write(pitch, row) };
    if status != OK {
        return status;
    }
    unsafe { device_alloc(dptr, row * height) }
}
pub unsafe fn mem_alloc_managed(dptr: *mut CUdeviceptr, bytesize: usize, _flags: c_uint) -> CUresult {
    if dptr.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match state().alloc_managed(bytesize as u64) {
        Some(addr) => unsafe { write(dptr, addr) },
        None => 2,
    }
}
pub unsafe fn mem_alloc_host(pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    unsafe { host_alloc(pp, bytesize) }
}
pub unsafe fn mem_host_alloc(pp: *mut *mut c_void, bytesize: usize, _flags: c_uint) -> CUresult {
    unsafe { host_alloc(pp, bytesize) }
}
pub unsafe fn mem_host_register(_p: *mut c_void, _bytesize: usize, _flags: c_uint) -> CUresult {
    OK
}
pub unsafe fn mem_host_unregister(_p: *mut c_void) -> CUresult {
    OK
}
pub unsafe fn mem_free(dptr: CUdeviceptr) -> CUresult {
    pinned::complete();
    if dptr == 0 || state().free_device(dptr) {
        OK
    } else {
        CUDA_ERROR_INVALID_VALUE
    }
}
pub unsafe fn mem_free_host(p: *mut c_void) -> CUresult {
    pinned::complete();
    if state().free_host(p as u64) {
        OK
    } else {
        CUDA_ERROR_INVALID_VALUE
    }
}
pub unsafe fn mem_alloc_async(dptr: *mut CUdeviceptr, bytesize: usize, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { device_alloc(dptr, bytesize) },
        e => e,
    }
}
pub unsafe fn mem_alloc_from_pool_async(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    _pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    unsafe { mem_alloc_async(dptr, bytesize, stream) }
}
pub unsafe fn mem_free_async(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { mem_free(dptr) },
        e => e,
    }
}
pub unsafe fn mem_create(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    _prop: *const c_void,
    _flags: u64,
) -> CUresult {
    let h = state().new_handle(Object::MemHandle { size: size as u64 });
    unsafe { write(handle, h as u64) }
}
pub unsafe fn mem_map(
    _ptr: CUdeviceptr,
    _size: usize,
    _offset: usize,
    handle: CUmemGenericAllocationHandle,
    _flags: u64,
) -> CUresult {
    check(handle as *mut c_void, |o| matches!(o, Object::MemHandle { .. }))
}
pub unsafe fn mem_unmap(_ptr: CUdeviceptr, _size: usize) -> CUresult {
    OK
}
pub unsafe fn mem_release(handle: CUmemGenericAllocationHandle) -> CUresult {
    check(handle as *mut c_void, |o| matches!(o, Object::MemHandle { .. }))
}
/// What another process imports: the allocation's base, its size and this process's id
/// (bytes 0, 8 and 16) in the 64-byte handle or export data, so that two processes (a fork
/// keeps addresses) export different bytes, as with a real driver.
unsafe fn export(out: *mut u8, ptr: CUdeviceptr) -> CUresult {
    let found = state_read().allocations.get(&ptr).map(|a| a.size);
    match (found, out.is_null()) {
        (Some(size), false) => {
            // SAFETY: the caller's 64-byte block.
            unsafe { write_handle(out, [ptr, size]) };
            OK
        }
        _ => CUDA_ERROR_INVALID_VALUE,
    }
}

/// Writes `words` and this process's id into a 64-byte handle at `out`.
unsafe fn write_handle(out: *mut u8, words: [u64; 2]) {
    let pid = u64::from(std::process::id());
    // SAFETY: the caller's 64-byte block.
    unsafe {
        core::ptr::write_bytes(out, 0, 64);
        for (i, word) in words.into_iter().chain([pid]).enumerate() {
            core::ptr::copy_nonoverlapping(word.to_le_bytes().as_ptr(), out.add(8 * i), 8);
        }
    }
}

pub unsafe fn ipc_get_mem_handle(handle: *mut IpcMemHandle, dptr: CUdeviceptr) -> CUresult {
    unsafe { export(handle.cast(), dptr) }
}
pub unsafe fn mem_pool_export_pointer(share_data: *mut c_void, ptr: CUdeviceptr) -> CUresult {
    unsafe { export(share_data.cast(), ptr) }
}

/// A buffer "imported" from another process: the stand-in shares no memory between
/// processes, so an imported handle names a size, and opening it makes a new allocation of
/// that size, in the exporter's process too (a real driver refuses that).
unsafe fn import(ptr: *mut CUdeviceptr, exported: *const u8) -> CUresult {
    if exported.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let mut size = [0u8; 8];
    // SAFETY: the caller's 64-byte handle or export data.
    unsafe { core::ptr::copy_nonoverlapping(exported.add(8), size.as_mut_ptr(), 8) };
    unsafe { device_alloc(ptr, u64::from_le_bytes(size) as usize) }
}
pub unsafe fn ipc_open_mem_handle(pdptr: *mut CUdeviceptr, handle: IpcMemHandle, _flags: c_uint) -> CUresult {
    unsafe { import(pdptr, handle.reserved.as_ptr()) }
}
pub unsafe fn ipc_close_mem_handle(dptr: CUdeviceptr) -> CUresult {
    unsafe { mem_free(dptr) }
}
pub unsafe fn mem_pool_import_pointer(
    ptr_out: *mut CUdeviceptr,
    pool: CUmemoryPool,
    share_data: *mut c_void,
) -> CUresult {
    match check(pool, |o| matches!(o, Object::MemPool { .. })) {
        OK => unsafe { import(ptr_out, share_data.cast()) },
        e => e,
    }
}

// ---- Copies -----------------------------------------------------------------------------

pub unsafe fn memcpy(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> CUresult {
    pinned::complete();
    unsafe { move_bytes(dst, src, bytes) };
    OK
}
/// Host-to-device copies from pinned memory up to this size are read at the call with
/// `STANDIN_INLINE_COPIES=1`.
const INLINE_BYTES: usize = 64 * 1024;

/// With `STANDIN_INLINE_COPIES=1`, a small copy from pinned memory to the device is read at
/// the call, on the CPU, through the program's own view of the memory, once the copies in
/// flight have landed, as a GPU's driver does (it reads a small pinned source inside
/// `cuMemcpyHtoDAsync` once its stream waited for the copy that wrote it); here for the
/// synchronous copy too. Returns whether it copied.
unsafe fn copied_inline(dst: CUdeviceptr, src: u64, bytes: usize) -> bool {
    let inline = bytes <= INLINE_BYTES
        && dst != 0
        && pinned::contains(src)
        && !pinned::contains(dst)
        && state_read().is_allocated(dst, bytes as u64)
        && std::env::var_os("STANDIN_INLINE_COPIES").is_some_and(|v| v == "1");
    if inline {
        pinned::complete();
        // SAFETY: `bytes` of pinned memory, read as the program sees them, into as many of
        // the stand-in's device memory (both checked above).
        unsafe { core::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
    }
    inline
}

/// With a side in pinned memory, the copy completes at the program's next wait (but see
/// [`copied_inline`]).
pub unsafe fn memcpy_async(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK if unsafe { copied_inline(dst, src, bytes) } => OK,
        OK if (pinned::contains(dst) || pinned::contains(src)) && dst != 0 && src != 0 => {
            pinned::defer(dst, src, bytes);
            OK
        }
        OK => unsafe { memcpy(dst, src, bytes) },
        e => e,
    }
}
pub unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> CUresult {
    if unsafe { copied_inline(dst, src as u64, bytes) } {
        return OK;
    }
    unsafe { memcpy(dst, src as u64, bytes) }
}
pub unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> CUresult {
    unsafe { memcpy(dst as u64, src, bytes) }
}
pub unsafe fn memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> CUresult {
    unsafe { memcpy(dst, src, bytes) }
}
/// The address of `bytes` bytes at byte `offset` of `array`.
fn array_bytes(array: CUarray, offset: usize, bytes: usize) -> Result<u64, CUresult> {
    match state_read().objects.get(&(array as usize)) {
        Some(&Object::Array { base, size, .. }) if offset as u64 + bytes as u64 <= size => Ok(base + offset as u64),
        Some(Object::Array { .. }) => Err(CUDA_ERROR_INVALID_VALUE),
        _ => Err(CUDA_ERROR_INVALID_HANDLE),
    }
}
pub unsafe fn memcpy_dtoa(dst: CUarray, off: usize, src: CUdeviceptr, bytes: usize) -> CUresult {
    match array_bytes(dst, off, bytes) {
        Ok(dst) => unsafe { memcpy(dst, src, bytes) },
        Err(e) => e,
    }
}
pub unsafe fn memcpy_atod(dst: CUdeviceptr, src: CUarray, off: usize, bytes: usize) -> CUresult {
    match array_bytes(src, off, bytes) {
        Ok(src) => unsafe { memcpy(dst, src, bytes) },
        Err(e) => e,
    }
}
pub unsafe fn memcpy_htoa(dst: CUarray, off: usize, src: *const c_void, bytes: usize) -> CUresult {
    unsafe { memcpy_dtoa(dst, off, src as u64, bytes) }
}
pub unsafe fn memcpy_atoh(dst: *mut c_void, src: CUarray, off: usize, bytes: usize) -> CUresult {
    unsafe { memcpy_atod(dst as u64, src, off, bytes) }
}
pub unsafe fn memcpy_atoa(dst: CUarray, dst_off: usize, src: CUarray, src_off: usize, bytes: usize) -> CUresult {
    match (array_bytes(dst, dst_off, bytes), array_bytes(src, src_off, bytes)) {
        (Ok(dst), Ok(src)) => unsafe { memcpy(dst, src, bytes) },
        (Err(e), _) | (_, Err(e)) => e,
    }
}
pub unsafe fn memcpy_htoa_async(
    dst: CUarray,
    off: usize,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> CUresult {
    match array_bytes(dst, off, bytes) {
        Ok(dst) => unsafe { memcpy_async(dst, src as u64, bytes, stream) },
        Err(e) => e,
    }
}
pub unsafe fn memcpy_atoh_async(
    dst: *mut c_void,
    src: CUarray,
    off: usize,
    bytes: usize,
    stream: CUstream,
) -> CUresult {
    match array_bytes(src, off, bytes) {
        Ok(src) => unsafe { memcpy_async(dst as u64, src, bytes, stream) },
        Err(e) => e,
    }
}
pub unsafe fn memcpy_htod_async(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream) -> CUresult {
    unsafe { memcpy_async(dst, src as u64, bytes, stream) }
}
pub unsafe fn memcpy_dtoh_async(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream) -> CUresult {
    unsafe { memcpy_async(dst as u64, src, bytes, stream) }
}
pub unsafe fn memcpy_dtod_async(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream) -> CUresult {
    unsafe { memcpy_async(dst, src, bytes, stream) }
}
pub unsafe fn memcpy_peer(
    dst: CUdeviceptr,
    _dc: CUcontext,
    src: CUdeviceptr,
    _sc: CUcontext,
    bytes: usize,
) -> CUresult {
    unsafe { memcpy(dst, src, bytes) }
}
pub unsafe fn memcpy_peer_async(
    dst: CUdeviceptr,
    _dc: CUcontext,
    src: CUdeviceptr,
    _sc: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> CUresult {
    unsafe { memcpy_async(dst, src, bytes, stream) }
}
/// One side of a 2D or 3D copy: where its first byte is, and how its rows lie.
struct Plane {
    base: u64,
    pitch: u64,
    /// Rows per slice.
    rows: u64,
}

impl Plane {
    /// The side a descriptor names: `memory_type` picks `host`, `device` or `array` (whose
    /// own row pitch and height apply), the copy starting at byte `x` of row `y` of slice `z`.
    fn of(
        memory_type: u32,
        host: u64,
        device: u64,
        array: CUarray,
        (x, y, z): (usize, usize, usize),
        pitch: usize,
        height: usize,
    ) -> Result<Plane, CUresult> {
        let (base, pitch, rows) = match memory_type {
            CU_MEMORYTYPE_HOST => (host, pitch as u64, height.max(1) as u64),
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => (device, pitch as u64, height.max(1) as u64),
            CU_MEMORYTYPE_ARRAY => match state_read().objects.get(&(array as usize)) {
                Some(&Object::Array { base, row, rows, .. }) => (base, row, rows),
                _ => return Err(CUDA_ERROR_INVALID_HANDLE),
            },
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let start = base + (z as u64 * rows + y as u64) * pitch + x as u64;
        Ok(Plane { base: start, pitch, rows })
    }

    fn row(&self, y: usize, z: usize) -> u64 {
        self.base + (z as u64 * self.rows + y as u64) * self.pitch
    }
}

/// Copies `width` bytes x `height` rows x `depth` slices row by row: at once, or on `stream`
/// (each row as an asynchronous copy: with a side in pinned memory, completing at the next
/// wait).
unsafe fn copy_rows(
    src: Result<Plane, CUresult>,
    dst: Result<Plane, CUresult>,
    (width, height, depth): (usize, usize, usize),
    stream: Option<CUstream>,
) -> CUresult {
    let (src, dst) = match (src, dst) {
        (Ok(src), Ok(dst)) => (src, dst),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Some(e @ 1..) = stream.map(check_stream) {
        return e;
    }
    for z in 0..depth {
        for y in 0..height {
            let (from, to) = (src.row(y, z), dst.row(y, z));
            match stream {
                Some(stream) => unsafe { memcpy_async(to, from, width, stream) },
                None => unsafe { memcpy(to, from, width) },
            };
        }
    }
    OK
}

unsafe fn copy_2d(copy: *const Memcpy2D, stream: Option<CUstream>) -> CUresult {
    // SAFETY: the caller's descriptor.
    let Some(c) = (unsafe { copy.as_ref() }) else { return CUDA_ERROR_INVALID_VALUE };
    let (sx, sy) = (c.src_x_in_bytes, c.src_y);
    let (dx, dy) = (c.dst_x_in_bytes, c.dst_y);
    let src = Plane::of(c.src_memory_type, c.src_host as u64, c.src_device, c.src_array, (sx, sy, 0), c.src_pitch, 0);
    let dst = Plane::of(c.dst_memory_type, c.dst_host as u64, c.dst_device, c.dst_array, (dx, dy, 0), c.dst_pitch, 0);
    unsafe { copy_rows(src, dst, (c.width_in_bytes, c.height, 1), stream) }
}

/// `CUDA_MEMCPY3D` and `CUDA_MEMCPY3D_PEER` name their sides' fields alike.
macro_rules! copy_3d {
    ($copy:expr, $stream:expr) => {{
        // SAFETY: the caller's descriptor.
        let Some(c) = (unsafe { $copy.as_ref() }) else { return CUDA_ERROR_INVALID_VALUE };
        let at = |x, y, z| (x, y, z);
        let src = Plane::of(
            c.src_memory_type,
            c.src_host as u64,
            c.src_device,
            c.src_array,
            at(c.src_x_in_bytes, c.src_y, c.src_z),
            c.src_pitch,
            c.src_height,
        );
        let dst = Plane::of(
            c.dst_memory_type,
            c.dst_host as u64,
            c.dst_device,
            c.dst_array,
            at(c.dst_x_in_bytes, c.dst_y, c.dst_z),
            c.dst_pitch,
            c.dst_height,
        );
        unsafe { copy_rows(src, dst, (c.width_in_bytes, c.height, c.depth.max(1)), $stream) }
    }};
}

pub unsafe fn memcpy_2d(copy: *const Memcpy2D) -> CUresult {
    unsafe { copy_2d(copy, None) }
}
pub unsafe fn memcpy_2d_async(copy: *const Memcpy2D, stream: CUstream) -> CUresult {
    unsafe { copy_2d(copy, Some(stream)) }
}
pub unsafe fn memcpy_3d(copy: *const Memcpy3D) -> CUresult {
    copy_3d!(copy, None)
}
pub unsafe fn memcpy_3d_async(copy: *const Memcpy3D, stream: CUstream) -> CUresult {
    copy_3d!(copy, Some(stream))
}
pub unsafe fn memcpy_3d_peer(copy: *const Memcpy3DPeer) -> CUresult {
    copy_3d!(copy, None)
}
pub unsafe fn memcpy_3d_peer_async(copy: *const Memcpy3DPeer, stream: CUstream) -> CUresult {
    copy_3d!(copy, Some(stream))
}
/// `cuMemcpyBatchAsync`: refused on the legacy NULL stream, and unless each attribute
/// (`CUmemcpyAttributes`, 24 bytes, its source access order first) names an order and the
/// first applies to copy 0; then each copy made on `stream`.
unsafe fn batch(
    (dsts, srcs, sizes, count): (*mut CUdeviceptr, *mut CUdeviceptr, *mut usize, usize),
    (attrs, attrs_idxs, num_attrs): (*mut c_void, *mut usize, usize),
    stream: CUstream,
) -> CUresult {
    if stream.is_null() || stream as usize == 1 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if let e @ 1.. = check_stream(stream) {
        return e;
    }
    if dsts.is_null() || srcs.is_null() || sizes.is_null() || attrs.is_null() || attrs_idxs.is_null() || num_attrs == 0
    {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's arrays of `num_attrs` entries.
    let orders = (0..num_attrs).map(|i| unsafe { *(attrs.cast::<u8>().add(24 * i) as *const u32) });
    if unsafe { *attrs_idxs } != 0 || orders.into_iter().any(|o| !(1..=3).contains(&o)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for i in 0..count {
        // SAFETY: the caller's arrays of `count` elements.
        unsafe { move_bytes(*dsts.add(i), *srcs.add(i), *sizes.add(i)) };
    }
    OK
}
pub unsafe fn memcpy_batch_async(
    dsts: *mut CUdeviceptr,
    srcs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut c_void,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    _fail: *mut usize,
    stream: CUstream,
) -> CUresult {
    unsafe { batch((dsts, srcs, sizes, count), (attrs, attrs_idxs, num_attrs), stream) }
}
pub unsafe fn memcpy_batch_async_v2(
    dsts: *mut CUdeviceptr,
    srcs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut c_void,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    stream: CUstream,
) -> CUresult {
    unsafe { batch((dsts, srcs, sizes, count), (attrs, attrs_idxs, num_attrs), stream) }
}

/// The bytes per element of a batched 3D copy: an array operand's, one between pointers.
fn batch_element(op: &Memcpy3DBatchOp) -> usize {
    for operand in [&op.src, &op.dst] {
        if operand.operand_type == CU_MEMCPY_OPERAND_TYPE_ARRAY {
            // SAFETY: the union's member its type names.
            let array = unsafe { operand.value.array }.array as usize;
            if let Some(&Object::Array { element, .. }) = state_read().objects.get(&array) {
                return element as usize;
            }
        }
    }
    1
}

/// One operand of a batched 3D copy of `extent` elements of `element` bytes.
fn batch_operand(operand: &Memcpy3DOperand, element: usize, extent: [usize; 3]) -> Result<Plane, CUresult> {
    let packed = |given: usize, extent: usize| if given == 0 { extent } else { given };
    let null = core::ptr::null_mut();
    match operand.operand_type {
        CU_MEMCPY_OPERAND_TYPE_POINTER => {
            // SAFETY: the union's member its type names.
            let p = unsafe { operand.value.ptr };
            let pitch = packed(p.row_length, extent[0]) * element;
            Plane::of(CU_MEMORYTYPE_UNIFIED, 0, p.ptr, null, (0, 0, 0), pitch, packed(p.layer_height, extent[1]))
        }
        CU_MEMCPY_OPERAND_TYPE_ARRAY => {
            // SAFETY: as above.
            let a = unsafe { operand.value.array };
            Plane::of(CU_MEMORYTYPE_ARRAY, 0, 0, a.array, (a.offset[0] * element, a.offset[1], a.offset[2]), 0, 0)
        }
        _ => Err(CUDA_ERROR_INVALID_VALUE),
    }
}

/// `cuMemcpy3DBatchAsync`: every operation checked first (the index of a refused one written
/// to `fail_idx`), then each copied row by row on `stream`, which must not be the NULL stream.
unsafe fn batch_3d(
    num_ops: usize,
    ops: *mut Memcpy3DBatchOp,
    fail_idx: *mut usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    let fail = |index: usize, status: CUresult| {
        // SAFETY: the caller's out-parameter, when given.
        if let Some(out) = unsafe { fail_idx.as_mut() } {
            *out = index;
        }
        status
    };
    if stream.is_null() || ops.is_null() || num_ops == 0 || flags != 0 {
        return fail(usize::MAX, CUDA_ERROR_INVALID_VALUE);
    }
    if let e @ 1.. = check_stream(stream) {
        return fail(usize::MAX, e);
    }
    let mut planned = Vec::with_capacity(num_ops);
    for i in 0..num_ops {
        // SAFETY: the caller's array of `num_ops` operations, read up to the first refused.
        let op = unsafe { &*ops.add(i) };
        let element = batch_element(op);
        let planes = (batch_operand(&op.src, element, op.extent), batch_operand(&op.dst, element, op.extent));
        match planes {
            _ if !(1..=3).contains(&op.src_access_order) || op.extent.contains(&0) => {
                return fail(i, CUDA_ERROR_INVALID_VALUE);
            }
            (Ok(src), Ok(dst)) => planned.push((src, dst, op.extent, element)),
            (Err(e), _) | (_, Err(e)) => return fail(i, e),
        }
    }
    for (src, dst, [width, height, depth], element) in planned {
        unsafe { copy_rows(Ok(src), Ok(dst), (width * element, height, depth), Some(stream)) };
    }
    OK
}
pub unsafe fn memcpy_3d_batch_async(
    num_ops: usize,
    ops: *mut Memcpy3DBatchOp,
    fail_idx: *mut usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    unsafe { batch_3d(num_ops, ops, fail_idx, flags, stream) }
}
pub unsafe fn memcpy_3d_batch_async_v2(
    num_ops: usize,
    ops: *mut Memcpy3DBatchOp,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    unsafe { batch_3d(num_ops, ops, core::ptr::null_mut(), flags, stream) }
}

// ---- Arrays -----------------------------------------------------------------------------

/// An array of `width` x `height` x `depth` elements (0: a dimension it does not have) of
/// the format's size (one byte for a format without one): device memory.
fn array_of((width, height, depth): (usize, usize, usize), format: u32, channels: c_uint) -> Result<usize, CUresult> {
    if width == 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let element = array_element_size(format, channels).unwrap_or(1);
    let (row, rows) = (width as u64 * element, height.max(1) as u64);
    let size = row * rows * depth.max(1) as u64;
    let mut s = state();
    let base = s.alloc_device(size).ok_or(2u32)?; // CUDA_ERROR_OUT_OF_MEMORY
    Ok(s.new_handle(Object::Array { base, size, element, row, rows }))
}
unsafe fn new_array(handle: *mut CUarray, shape: (usize, usize, usize), format: u32, channels: c_uint) -> CUresult {
    if handle.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match array_of(shape, format, channels) {
        Ok(array) => unsafe { write(handle, array as CUarray) },
        Err(e) => e,
    }
}
/// Frees the array `array`, if it is one.
fn free_array(array: usize) -> CUresult {
    let mut s = state();
    match s.objects.get(&array) {
        Some(&Object::Array { base, .. }) => {
            s.objects.remove(&array);
            s.free_device(base);
            OK
        }
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}
pub unsafe fn array_create(handle: *mut CUarray, descriptor: *const ArrayDescriptor) -> CUresult {
    // SAFETY: the caller's descriptor.
    match unsafe { descriptor.as_ref() } {
        Some(d) => unsafe { new_array(handle, (d.width, d.height, 0), d.format, d.num_channels) },
        None => CUDA_ERROR_INVALID_VALUE,
    }
}
pub unsafe fn array_3d_create(handle: *mut CUarray, descriptor: *const Array3DDescriptor) -> CUresult {
    // SAFETY: the caller's descriptor.
    match unsafe { descriptor.as_ref() } {
        Some(d) => unsafe { new_array(handle, (d.width, d.height, d.depth), d.format, d.num_channels) },
        None => CUDA_ERROR_INVALID_VALUE,
    }
}
/// Synchronous, as `cuMemFree`: copies in flight complete first.
pub unsafe fn array_destroy(array: CUarray) -> CUresult {
    pinned::complete();
    free_array(array as usize)
}
/// A mipmapped array: every level made at once, each dimension halved per level down to 1
/// (but the layers of a layered or cubemap array).
pub unsafe fn mipmapped_array_create(
    handle: *mut CUmipmappedArray,
    descriptor: *const Array3DDescriptor,
    num_levels: c_uint,
) -> CUresult {
    // SAFETY: the caller's descriptor.
    let Some(d) = (unsafe { descriptor.as_ref() }) else { return CUDA_ERROR_INVALID_VALUE };
    if handle.is_null() || num_levels == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let halved = |n: usize, level: u32| if n == 0 { 0 } else { n.checked_shr(level).unwrap_or(0).max(1) };
    let layers = d.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP) != 0;
    let mut levels = Vec::new();
    for level in 0..num_levels {
        let depth = if layers { d.depth } else { halved(d.depth, level) };
        let shape = (halved(d.width, level), halved(d.height, level), depth);
        match array_of(shape, d.format, d.num_channels) {
            Ok(array) => levels.push(array),
            Err(e) => {
                for array in levels {
                    free_array(array);
                }
                return e;
            }
        }
    }
    new_object(handle, Object::Mipmap { levels })
}
pub unsafe fn mipmapped_array_get_level(
    level_array: *mut CUarray,
    mipmap: CUmipmappedArray,
    level: c_uint,
) -> CUresult {
    let found = match state_read().objects.get(&(mipmap as usize)) {
        Some(Object::Mipmap { levels }) => levels.get(level as usize).copied().ok_or(CUDA_ERROR_INVALID_VALUE),
        _ => Err(CUDA_ERROR_INVALID_HANDLE),
    };
    match found {
        Ok(array) => unsafe { write(level_array, array as CUarray) },
        Err(e) => e,
    }
}
/// Synchronous, as `cuArrayDestroy`: its levels go with it.
pub unsafe fn mipmapped_array_destroy(mipmap: CUmipmappedArray) -> CUresult {
    pinned::complete();
    let mut s = state();
    let levels = match s.objects.get(&(mipmap as usize)) {
        Some(Object::Mipmap { levels }) => levels.clone(),
        _ => return CUDA_ERROR_INVALID_HANDLE,
    };
    s.objects.remove(&(mipmap as usize));
    drop(s);
    for array in levels {
        free_array(array);
    }
    OK
}

// ---- Memsets ----------------------------------------------------------------------------

pub unsafe fn memset_d8(dst: CUdeviceptr, value: c_uchar, count: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, count, value, count, 1) };
    OK
}
pub unsafe fn memset_d16(dst: CUdeviceptr, value: c_ushort, count: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, count * 2, value, count, 1) };
    OK
}
pub unsafe fn memset_d32(dst: CUdeviceptr, value: c_uint, count: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, count * 4, value, count, 1) };
    OK
}
pub unsafe fn memset_d2d8(dst: CUdeviceptr, pitch: usize, value: c_uchar, width: usize, height: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, pitch, value, width, height) };
    OK
}
pub unsafe fn memset_d2d16(dst: CUdeviceptr, pitch: usize, value: c_ushort, width: usize, height: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, pitch, value, width, height) };
    OK
}
pub unsafe fn memset_d2d32(dst: CUdeviceptr, pitch: usize, value: c_uint, width: usize, height: usize) -> CUresult {
    pinned::complete();
    unsafe { fill(dst, pitch, value, width, height) };
    OK
}
pub unsafe fn memset_d8_async(dst: CUdeviceptr, value: c_uchar, count: usize, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d8(dst, value, count) },
        e => e,
    }
}
pub unsafe fn memset_d16_async(dst: CUdeviceptr, value: c_ushort, count: usize, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d16(dst, value, count) },
        e => e,
    }
}
pub unsafe fn memset_d32_async(dst: CUdeviceptr, value: c_uint, count: usize, stream: CUstream) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d32(dst, value, count) },
        e => e,
    }
}
pub unsafe fn memset_d2d8_async(
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uchar,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d2d8(dst, pitch, value, width, height) },
        e => e,
    }
}
pub unsafe fn memset_d2d16_async(
    dst: CUdeviceptr,
    pitch: usize,
    value: c_ushort,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d2d16(dst, pitch, value, width, height) },
        e => e,
    }
}
pub unsafe fn memset_d2d32_async(
    dst: CUdeviceptr,
    pitch: usize,
    value: c_uint,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    match check_stream(stream) {
        OK => unsafe { memset_d2d32(dst, pitch, value, width, height) },
        e => e,
    }
}

/// What a synchronize does: pinned copies complete, and the device's time runs out.
fn synchronized() {
    pinned::complete();
    device_time::wait();
}

// ---- Launches ---------------------------------------------------------------------------

/// Dynamic shared memory a launch may ask for without raising its function's
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, as on a GPU.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 << 10;

/// A launch of `f` on `stream` with `params` and `shared` bytes of dynamic shared memory: if
/// accepted, it takes device time ([`device_time`]) and is told to an attached Compute
/// Sanitizer library, as the real one hears of every launch ([`crate::sanitizer`]).
///
/// # Safety
/// `params` is null or holds one pointer per parameter of `f`, each to its value.
unsafe fn launch(f: CUfunction, stream: CUstream, params: *mut *mut c_void, shared: c_uint) -> CUresult {
    let status = match check(f, |o| matches!(o, Object::Function { .. } | Object::Kernel { .. })) {
        OK => check_stream(stream),
        e => e,
    };
    let status = if status == OK
        && shared > DEFAULT_DYNAMIC_SHARED
        && crate::queries::func_attribute(f as usize, crate::queries::MAX_DYNAMIC_SHARED) < shared as i32
    {
        CUDA_ERROR_INVALID_VALUE
    } else {
        status
    };
    if status != OK {
        return status;
    }
    let node = KernelNodeParams {
        func: f,
        grid_dim: [1; 3],
        block_dim: [1; 3],
        shared_mem_bytes: shared,
        kernel_params: params,
        extra: core::ptr::null_mut(),
        kern: core::ptr::null_mut(),
        ctx: core::ptr::null_mut(),
    };
    // SAFETY: the caller's promise.
    if unsafe { graphs::captured(stream, || state().new_handle(Object::GraphNode { graph: 0 }), &node) } {
        return OK;
    }
    device_time::launched();
    counted(f as usize);
    // SAFETY: the caller's promise.
    unsafe {
        copies_variables(f as usize, params);
        crate::sanitizer::launched(f, stream, params);
    }
    OK
}

/// A graph launch on `stream`: its kernel nodes run, in order, as launches on `stream`.
fn run_graph(exec: CUgraphExec, stream: CUstream) {
    for (f, mut values) in graphs::launch(exec) {
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();
        counted(f as usize);
        // SAFETY: one pointer per parameter of `f`, each to its value.
        unsafe { crate::sanitizer::launched(f, stream, params.as_mut_ptr()) };
    }
}

/// What the kernel `footprint_counted` does to memory: adds one to its module's variable
/// `launches` (so a program can tell which module's copy of the variable its launches used).
fn counted(f: usize) {
    let s = state_read();
    let Some(Object::Function { entry, owner, .. }) = s.objects.get(&f) else { return };
    if entry.name != "footprint_counted" {
        return;
    }
    if let Some(Object::Module { variables, .. }) = s.objects.get(owner) {
        if let Some(&(address, 4)) = variables.get("launches") {
            // SAFETY: stand-in memory of 4 bytes, the variable's.
            unsafe {
                let count = pinned::device_view(address) as *mut u32;
                count.write_unaligned(count.read_unaligned() + 1);
            }
        }
    }
}

/// What the footprint engine's kernel `streamsan_copy_variables(count, back, entries)` does
/// to memory (`shim/footprint/src/copy_variables.ptx`): for each of its `count` entries {the
/// program's address, the twin's, a snapshot's, bytes}, copies the program's bytes that
/// differ from the snapshot to the twin's variable or, with `back`, the twin's back, the
/// snapshot taking each byte copied.
///
/// # Safety
/// `params` as for [`launch`].
unsafe fn copies_variables(f: usize, params: *mut *mut c_void) {
    let is_copier = matches!(state_read().objects.get(&f), Some(Object::Function { entry, .. }) if entry.name == "streamsan_copy_variables");
    if !is_copier || params.is_null() {
        return;
    }
    // SAFETY: the copier's three parameters, as its PTX declares them.
    let (count, back, entries) =
        unsafe { (*(*params as *const u32), *(*params.add(1) as *const u32), *params.add(2) as *const [u64; 4]) };
    for i in 0..count as usize {
        // SAFETY: `count` entries; the variables and the snapshot stand-in memory of `bytes`
        // each.
        unsafe {
            let [own, twin, snapshot, bytes] = entries.add(i).read_unaligned();
            let (from, to) = if back != 0 { (twin, own) } else { (own, twin) };
            let (from, to, snapshot) = (
                pinned::device_view(from) as *const u8,
                pinned::device_view(to) as *mut u8,
                pinned::device_view(snapshot) as *mut u8,
            );
            for b in 0..bytes as usize {
                let value = *from.add(b);
                if value != *snapshot.add(b) {
                    *to.add(b) = value;
                    *snapshot.add(b) = value;
                }
            }
        }
    }
}

pub unsafe fn launch_kernel(
    f: CUfunction,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    shm: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    // SAFETY: the program's parameters, one per parameter of `f`.
    unsafe { launch(f, stream, params, shm) }
}
pub unsafe fn launch_kernel_ex(
    config: *const LaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    if config.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's launch configuration and parameters.
    unsafe { launch(f, (*config).stream, params, (*config).shared_mem_bytes) }
}
pub unsafe fn launch_cooperative_kernel(
    f: CUfunction,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    shm: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
) -> CUresult {
    // SAFETY: the program's parameters, one per parameter of `f`.
    unsafe { launch(f, stream, params, shm) }
}
pub unsafe fn launch_host_func(stream: CUstream, func: CUhostFn, user_data: *mut c_void) -> CUresult {
    if let e @ 1.. = check_stream(stream) {
        return e;
    }
    match func {
        Some(func) => callbacks::enqueue(Box::new(move || unsafe { func(user_data) })),
        None => return CUDA_ERROR_INVALID_VALUE,
    }
    OK
}
pub unsafe fn stream_add_callback(
    stream: CUstream,
    callback: CUstreamCallback,
    user_data: *mut c_void,
    _flags: c_uint,
) -> CUresult {
    if let e @ 1.. = check_stream(stream) {
        return e;
    }
    match callback {
        Some(callback) => callbacks::enqueue(Box::new(move || unsafe { callback(stream, OK, user_data) })),
        None => return CUDA_ERROR_INVALID_VALUE,
    }
    OK
}

/// When host functions run. By default at once, inside the call that enqueues them; with
/// `STANDIN_DEFER_CALLBACKS=1`, when the program calls `standinRunCallbacks()`, so that a
/// test can decide whether the host waited for one (a real driver runs them on its own
/// thread once the stream reaches them).
pub mod callbacks {
    use std::sync::Mutex;

    pub type Callback = Box<dyn FnOnce()>;

    struct Pending(Vec<Callback>);
    // SAFETY: the callbacks carry the program's pointers, which the program passed for use
    // on another thread (the driver's).
    unsafe impl Send for Pending {}

    static PENDING: Mutex<Pending> = Mutex::new(Pending(Vec::new()));

    fn deferred() -> bool {
        std::env::var_os("STANDIN_DEFER_CALLBACKS").is_some_and(|v| v == "1")
    }

    /// A host function runs after the copies issued before it.
    pub fn enqueue(callback: Callback) {
        if deferred() {
            PENDING.lock().unwrap().0.push(callback);
        } else {
            crate::pinned::complete();
            callback();
        }
    }

    /// Runs every deferred callback, in order, on the calling thread, as a real driver's
    /// thread runs them: a callback may end that thread with a forced unwind
    /// (`pthread_exit`), which passes through here ("C-unwind"; no destructor alive across
    /// the call but the callback's own box).
    #[unsafe(no_mangle)]
    pub extern "C-unwind" fn standinRunCallbacks() {
        crate::pinned::complete();
        while let Some(callback) = next() {
            callback();
        }
    }

    fn next() -> Option<Callback> {
        let mut pending = PENDING.lock().unwrap();
        (!pending.0.is_empty()).then(|| pending.0.remove(0))
    }
}

// ---- Code -------------------------------------------------------------------------------

unsafe fn text_at(p: *const c_void) -> Option<String> {
    // SAFETY: images are NUL-terminated PTX text in the stand-in's world.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p.cast()) }.to_string_lossy().into_owned())
}

/// Code as the stand-in loads it: the PTX that declares its kernels, and the image as given
/// (what a Compute Sanitizer library is told the module's code is).
type Code = (String, Vec<u8>);

fn text(ptx: Option<String>) -> Option<Code> {
    ptx.map(|ptx| (ptx.clone(), ptx.into_bytes()))
}

/// The image at `p`: an ELF cubin carrying its kernels' PTX ([`ptx::cubin`]), or PTX text.
unsafe fn image_at(p: *const c_void) -> Option<Code> {
    if p.is_null() {
        return None;
    }
    // SAFETY: an image has a first byte; one of 0x7f (never text's) is an ELF header's first,
    // of 64 bytes.
    let elf = unsafe { *p.cast::<u8>() } == 0x7f;
    // SAFETY: as above.
    let head = if elf { unsafe { core::slice::from_raw_parts(p.cast::<u8>(), 64) } } else { &[][..] };
    // SAFETY: any other image is NUL-terminated PTX text.
    let Some(size) = ptx::cubin_size(head) else { return text(unsafe { text_at(p) }) };
    // SAFETY: a cubin holds its section headers, which end at `size`.
    let image = unsafe { core::slice::from_raw_parts(p.cast::<u8>(), size) }.to_vec();
    Some((ptx::cubin(&image)?, image))
}

unsafe fn file_text(path: *const c_char) -> Option<String> {
    let path = unsafe { text_at(path.cast())? };
    std::fs::read_to_string(path).ok()
}

fn entries_by_name(ptx: &str) -> HashMap<String, ptx::Entry> {
    ptx::entries(ptx).into_iter().map(|e| (e.name.clone(), e)).collect()
}

/// A module or library loaded from `code` as `object` (given its kernels and its PTX), told
/// to an attached Compute Sanitizer library with its image.
unsafe fn load_code(
    out: *mut *mut c_void,
    code: Option<Code>,
    object: fn(HashMap<String, ptx::Entry>, &str) -> Object,
) -> CUresult {
    let Some((ptx, image)) = code else { return 218 }; // CUDA_ERROR_INVALID_PTX
    let status = new_object(out, object(entries_by_name(&ptx), &ptx));
    if status == OK {
        // SAFETY: the handle was just written.
        crate::sanitizer::module(unsafe { *out } as usize, Some(&image));
    }
    status
}

/// A module's `.global` variables, each in device memory of its own, zeroed.
fn variables(ptx: &str) -> HashMap<String, (u64, usize)> {
    let mut s = state();
    ptx::variables(ptx)
        .into_iter()
        .filter_map(|(name, bytes)| {
            let address = s.alloc_device(bytes as u64)?;
            // SAFETY: stand-in memory of `bytes` bytes, just allocated.
            unsafe { core::ptr::write_bytes(pinned::device_view(address) as *mut u8, 0, bytes) };
            Some((name, (address, bytes)))
        })
        .collect()
}

unsafe fn load_module(module: *mut CUmodule, code: Option<Code>) -> CUresult {
    unsafe { load_code(module.cast(), code, |functions, ptx| Object::Module { functions, variables: variables(ptx) }) }
}

unsafe fn load_library(library: *mut CUlibrary, ptx: Option<String>) -> CUresult {
    unsafe { load_code(library.cast(), text(ptx), |kernels, _| Object::Library { kernels }) }
}

pub unsafe fn module_load(module: *mut CUmodule, fname: *const c_char) -> CUresult {
    unsafe { load_module(module, text(file_text(fname))) }
}
pub unsafe fn module_load_data(module: *mut CUmodule, image: *const c_void) -> CUresult {
    unsafe { load_module(module, image_at(image)) }
}
pub unsafe fn module_load_data_ex(
    module: *mut CUmodule,
    image: *const c_void,
    _n: c_uint,
    _o: *mut u32,
    _v: *mut *mut c_void,
) -> CUresult {
    unsafe { load_module(module, image_at(image)) }
}
pub unsafe fn module_load_fat_binary(module: *mut CUmodule, fat_cubin: *const c_void) -> CUresult {
    unsafe { load_module(module, text(text_at(fat_cubin))) }
}
pub unsafe fn module_get_function(hfunc: *mut CUfunction, module: CUmodule, name: *const c_char) -> CUresult {
    let Some(name) = (unsafe { text_at(name.cast()) }) else { return CUDA_ERROR_INVALID_VALUE };
    let entry = match state().objects.get(&(module as usize)) {
        Some(Object::Module { functions, .. }) => functions.get(&name).cloned(),
        _ => return CUDA_ERROR_INVALID_HANDLE,
    };
    match entry {
        Some(entry) => new_object(hfunc, Object::Function { entry, kernel: None, owner: module as usize }),
        None => CUDA_ERROR_NOT_FOUND,
    }
}
pub unsafe fn library_load_data(
    library: *mut CUlibrary,
    code: *const c_void,
    _jo: *mut u32,
    _jv: *mut *mut c_void,
    _nj: c_uint,
    _lo: *mut u32,
    _lv: *mut *mut c_void,
    _nl: c_uint,
) -> CUresult {
    unsafe { load_library(library, text_at(code)) }
}
pub unsafe fn library_load_from_file(
    library: *mut CUlibrary,
    file_name: *const c_char,
    _jo: *mut u32,
    _jv: *mut *mut c_void,
    _nj: c_uint,
    _lo: *mut u32,
    _lv: *mut *mut c_void,
    _nl: c_uint,
) -> CUresult {
    unsafe { load_library(library, file_text(file_name)) }
}
pub unsafe fn library_get_kernel(kernel: *mut CUkernel, library: CUlibrary, name: *const c_char) -> CUresult {
    let Some(name) = (unsafe { text_at(name.cast()) }) else { return CUDA_ERROR_INVALID_VALUE };
    let entry = match state().objects.get(&(library as usize)) {
        Some(Object::Library { kernels }) => kernels.get(&name).cloned(),
        _ => return CUDA_ERROR_INVALID_HANDLE,
    };
    match entry {
        Some(entry) => new_object(kernel, Object::Kernel { entry, owner: library as usize }),
        None => CUDA_ERROR_NOT_FOUND,
    }
}
pub unsafe fn kernel_get_function(func: *mut CUfunction, kernel: CUkernel) -> CUresult {
    let (entry, owner) = match state().objects.get(&(kernel as usize)) {
        Some(Object::Kernel { entry, owner }) => (entry.clone(), *owner),
        _ => return CUDA_ERROR_INVALID_HANDLE,
    };
    new_object(func, Object::Function { entry, kernel: Some(kernel as usize), owner })
}
fn unload(owner: usize, is_owner: fn(&Object) -> bool) -> CUresult {
    if !state_read().objects.get(&owner).is_some_and(is_owner) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    crate::sanitizer::module(owner, None);
    state().unload(owner);
    OK
}
pub unsafe fn module_unload(module: CUmodule) -> CUresult {
    unload(module as usize, |o| matches!(o, Object::Module { .. }))
}
pub unsafe fn library_unload(library: CUlibrary) -> CUresult {
    unload(library as usize, |o| matches!(o, Object::Library { .. }))
}

// ---- Streams ----------------------------------------------------------------------------

pub unsafe fn stream_create(stream: *mut CUstream, flags: c_uint) -> CUresult {
    unsafe { stream_create_with_priority(stream, flags, 0) }
}
pub unsafe fn stream_create_with_priority(stream: *mut CUstream, flags: c_uint, priority: c_int) -> CUresult {
    let ctx = device::current_context();
    if ctx == 0 {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    new_object(stream, Object::Stream { ctx, flags, priority, capturing: false })
}
pub unsafe fn stream_destroy(stream: CUstream) -> CUresult {
    match state().objects.remove(&(stream as usize)) {
        Some(Object::Stream { .. }) => OK,
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}
pub unsafe fn stream_synchronize(stream: CUstream) -> CUresult {
    synchronized();
    check_stream(stream)
}
pub unsafe fn stream_set_attribute(stream: CUstream, _attr: u32, value: *const c_void) -> CUresult {
    if value.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    check_stream(stream)
}
pub unsafe fn stream_query(stream: CUstream) -> CUresult {
    pinned::complete();
    check_stream(stream)
}
pub unsafe fn stream_wait_event(stream: CUstream, event: CUevent, flags: c_uint) -> CUresult {
    // CU_EVENT_WAIT_DEFAULT and CU_EVENT_WAIT_EXTERNAL are the only flags.
    if flags > 1 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let status = match check_stream(stream) {
        OK => check(event, |o| matches!(o, Object::Event)),
        e => e,
    };
    // A wait on an event recorded in a capture joins the stream to it.
    if status == OK && graphs::waited(stream, event) {
        set_capturing(stream, true);
    }
    status
}
fn set_capturing(stream: CUstream, on: bool) -> CUresult {
    match state().objects.get_mut(&(stream as usize)) {
        Some(Object::Stream { capturing, .. }) => {
            *capturing = on;
            OK
        }
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}
fn begin_capture(stream: CUstream, into: Option<CUgraph>) -> CUresult {
    let status = set_capturing(stream, true);
    if status == OK {
        graphs::capture_began(stream, into);
    }
    status
}
pub unsafe fn stream_begin_capture_v1(stream: CUstream) -> CUresult {
    begin_capture(stream, None)
}
pub unsafe fn stream_begin_capture(stream: CUstream, _mode: u32) -> CUresult {
    begin_capture(stream, None)
}
pub unsafe fn stream_end_capture(stream: CUstream, graph: *mut CUgraph) -> CUresult {
    let status = match set_capturing(stream, false) {
        OK => new_object(graph, Object::Graph),
        e => e,
    };
    // SAFETY: written just now.
    for member in graphs::capture_ended(stream, (status == OK).then(|| unsafe { *graph })) {
        set_capturing(member as CUstream, false);
    }
    status
}
pub unsafe fn stream_begin_capture_to_graph(
    stream: CUstream,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _data: *const GraphEdgeData,
    _n: usize,
    _mode: u32,
) -> CUresult {
    match is_graph(graph) {
        OK => begin_capture(stream, Some(graph)),
        e => e,
    }
}
unsafe fn update_capture_dependencies(stream: CUstream, deps: *mut CUgraphNode, num_deps: usize) -> CUresult {
    let capturing =
        matches!(state_read().objects.get(&(stream as usize)), Some(Object::Stream { capturing: true, .. }));
    if !capturing {
        return 901; // CUDA_ERROR_ILLEGAL_STATE
    }
    if num_deps > 0 && deps.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        OK
    }
}
pub unsafe fn stream_update_capture_dependencies(
    stream: CUstream,
    deps: *mut CUgraphNode,
    num_deps: usize,
    _flags: c_uint,
) -> CUresult {
    unsafe { update_capture_dependencies(stream, deps, num_deps) }
}
pub unsafe fn stream_update_capture_dependencies_v2(
    stream: CUstream,
    deps: *mut CUgraphNode,
    _data: *const GraphEdgeData,
    num_deps: usize,
    _flags: c_uint,
) -> CUresult {
    unsafe { update_capture_dependencies(stream, deps, num_deps) }
}
pub unsafe fn stream_wait_value_32(stream: CUstream, _addr: CUdeviceptr, _value: u32, _flags: c_uint) -> CUresult {
    check_stream(stream)
}
pub unsafe fn stream_wait_value_64(stream: CUstream, _addr: CUdeviceptr, _value: u64, _flags: c_uint) -> CUresult {
    check_stream(stream)
}
unsafe fn write_value<T: Copy>(stream: CUstream, addr: CUdeviceptr, value: T) -> CUresult {
    if let e @ 1.. = check_stream(stream) {
        return e;
    }
    if state().is_allocated(addr, core::mem::size_of::<T>() as u64) {
        // SAFETY: stand-in memory.
        unsafe { (addr as *mut T).write_unaligned(value) };
    }
    OK
}
pub unsafe fn stream_write_value_32(stream: CUstream, addr: CUdeviceptr, value: u32, _flags: c_uint) -> CUresult {
    unsafe { write_value(stream, addr, value) }
}
pub unsafe fn stream_write_value_64(stream: CUstream, addr: CUdeviceptr, value: u64, _flags: c_uint) -> CUresult {
    unsafe { write_value(stream, addr, value) }
}
unsafe fn external_semaphores(sems: *const CUexternalSemaphore, count: c_uint, stream: CUstream) -> CUresult {
    if let e @ 1.. = check_stream(stream) {
        return e;
    }
    if sems.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's array of `count` handles.
    let sems = unsafe { core::slice::from_raw_parts(sems, count as usize) };
    if sems.iter().all(|&sem| check(sem, |o| matches!(o, Object::ExternalSemaphore)) == OK) {
        OK
    } else {
        CUDA_ERROR_INVALID_HANDLE
    }
}
pub unsafe fn signal_external_semaphores(
    sems: *const CUexternalSemaphore,
    _params: *const c_void,
    count: c_uint,
    stream: CUstream,
) -> CUresult {
    unsafe { external_semaphores(sems, count, stream) }
}
pub unsafe fn wait_external_semaphores(
    sems: *const CUexternalSemaphore,
    _params: *const c_void,
    count: c_uint,
    stream: CUstream,
) -> CUresult {
    unsafe { external_semaphores(sems, count, stream) }
}
pub unsafe fn stream_batch_mem_op(
    stream: CUstream,
    _count: c_uint,
    _params: *mut BatchMemOpParams,
    _flags: c_uint,
) -> CUresult {
    check_stream(stream)
}

// ---- Events -----------------------------------------------------------------------------

pub unsafe fn event_create(event: *mut CUevent, _flags: c_uint) -> CUresult {
    new_object(event, Object::Event)
}
pub unsafe fn event_record(event: CUevent, stream: CUstream) -> CUresult {
    let status = match check_stream(stream) {
        OK => check(event, |o| matches!(o, Object::Event)),
        e => e,
    };
    if status == OK {
        graphs::recorded(event, stream);
    }
    status
}
pub unsafe fn event_record_with_flags(event: CUevent, stream: CUstream, _flags: c_uint) -> CUresult {
    unsafe { event_record(event, stream) }
}
pub unsafe fn event_synchronize(event: CUevent) -> CUresult {
    synchronized();
    check(event, |o| matches!(o, Object::Event))
}
pub unsafe fn event_query(event: CUevent) -> CUresult {
    pinned::complete();
    check(event, |o| matches!(o, Object::Event))
}
/// An event another process may open: its handle and this process's id in the IPC handle.
pub unsafe fn ipc_get_event_handle(handle: *mut IpcEventHandle, event: CUevent) -> CUresult {
    match check(event, |o| matches!(o, Object::Event)) {
        OK if !handle.is_null() => {
            // SAFETY: the caller's 64-byte handle.
            unsafe { write_handle(handle.cast(), [event as u64, 0]) };
            OK
        }
        OK => CUDA_ERROR_INVALID_VALUE,
        e => e,
    }
}
/// Opening another process's event makes an event of this process (nothing is shared).
pub unsafe fn ipc_open_event_handle(event: *mut CUevent, _handle: IpcEventHandle) -> CUresult {
    new_object(event.cast(), Object::Event)
}
pub unsafe fn event_destroy(event: CUevent) -> CUresult {
    match state().objects.remove(&(event as usize)) {
        Some(Object::Event) => OK,
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}

// ---- Graphs -----------------------------------------------------------------------------

fn instantiate(exec: *mut CUgraphExec, graph: CUgraph) -> CUresult {
    let status = match check(graph, |o| matches!(o, Object::Graph)) {
        OK => new_object(exec, Object::GraphExec),
        e => e,
    };
    if status == OK {
        // SAFETY: written just now.
        graphs::instantiated(unsafe { *exec } as usize, graph);
    }
    status
}
pub unsafe fn graph_instantiate(
    exec: *mut CUgraphExec,
    graph: CUgraph,
    _en: *mut CUgraphNode,
    _log: *mut c_char,
    _size: usize,
) -> CUresult {
    instantiate(exec, graph)
}
pub unsafe fn graph_instantiate_with_flags(exec: *mut CUgraphExec, graph: CUgraph, _flags: u64) -> CUresult {
    instantiate(exec, graph)
}
pub unsafe fn graph_instantiate_with_params(exec: *mut CUgraphExec, graph: CUgraph, _params: *mut c_void) -> CUresult {
    instantiate(exec, graph)
}
pub unsafe fn graph_launch(exec: CUgraphExec, stream: CUstream) -> CUresult {
    let status = match check(exec, |o| matches!(o, Object::GraphExec)) {
        OK => check_stream(stream),
        e => e,
    };
    if status == OK {
        run_graph(exec, stream);
    }
    status
}
pub unsafe fn graph_exec_destroy(exec: CUgraphExec) -> CUresult {
    check(exec, |o| matches!(o, Object::GraphExec))
}
pub unsafe fn graph_destroy(graph: CUgraph) -> CUresult {
    check(graph, |o| matches!(o, Object::Graph))
}

pub fn check_graph(graph: CUgraph) -> CUresult {
    is_graph(graph)
}

fn is_graph(graph: CUgraph) -> CUresult {
    check(graph, |o| matches!(o, Object::Graph))
}

fn is_node(node: CUgraphNode) -> CUresult {
    check(node, |o| matches!(o, Object::GraphNode { .. }))
}

/// A node of `graph` after `deps`: the graph and every dependency must exist.
/// A node whose parameters the driver requires: refused without them, as the driver does.
unsafe fn add_node_with(
    params: *const c_void,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
) -> CUresult {
    if params.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        unsafe { add_node(node, graph, deps, num_deps) }
    }
}

unsafe fn add_node(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize) -> CUresult {
    if let e @ 1.. = is_graph(graph) {
        return e;
    }
    if num_deps > 0 && deps.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for i in 0..num_deps {
        // SAFETY: the caller's array of `num_deps` nodes.
        if let e @ 1.. = is_node(unsafe { *deps.add(i) }) {
            return e;
        }
    }
    let status = new_object(node, Object::GraphNode { graph: graph as usize });
    if status == OK {
        // SAFETY: written just now.
        graphs::node_added(graph, unsafe { *node } as usize);
    }
    status
}

pub unsafe fn graph_create(graph: *mut CUgraph, _flags: c_uint) -> CUresult {
    new_object(graph, Object::Graph)
}
pub unsafe fn graph_clone(clone: *mut CUgraph, original: CUgraph) -> CUresult {
    match is_graph(original) {
        OK => new_object(clone, Object::Graph),
        e => e,
    }
}
pub unsafe fn graph_add_kernel_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const KernelNodeParams,
) -> CUresult {
    // SAFETY: the caller's parameters.
    match unsafe { params.as_ref() } {
        Some(p) if check(p.func, |o| matches!(o, Object::Function { .. } | Object::Kernel { .. })) == OK => unsafe {
            let status = add_node(node, graph, deps, num_deps);
            if status == OK {
                graphs::kernel_params(*node as usize, p);
            }
            status
        },
        Some(_) => CUDA_ERROR_INVALID_HANDLE,
        None => CUDA_ERROR_INVALID_VALUE,
    }
}
pub unsafe fn graph_add_memcpy_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    copy: *const Memcpy3D,
    _ctx: CUcontext,
) -> CUresult {
    if copy.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        unsafe { add_node(node, graph, deps, num_deps) }
    }
}
pub unsafe fn graph_add_memset_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const MemsetNodeParams,
    _ctx: CUcontext,
) -> CUresult {
    unsafe { add_node_with(params.cast(), node, graph, deps, num_deps) }
}
pub unsafe fn graph_add_host_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const c_void,
) -> CUresult {
    unsafe { add_node_with(params.cast(), node, graph, deps, num_deps) }
}
pub unsafe fn graph_add_empty_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
) -> CUresult {
    unsafe { add_node(node, graph, deps, num_deps) }
}
pub unsafe fn graph_add_child_graph_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    child: CUgraph,
) -> CUresult {
    match is_graph(child) {
        OK => unsafe { add_node(node, graph, deps, num_deps) },
        e => e,
    }
}
pub unsafe fn graph_add_event_record_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    event: CUevent,
) -> CUresult {
    match check(event, |o| matches!(o, Object::Event)) {
        OK => unsafe { add_node(node, graph, deps, num_deps) },
        e => e,
    }
}
pub unsafe fn graph_add_event_wait_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    event: CUevent,
) -> CUresult {
    unsafe { graph_add_event_record_node(node, graph, deps, num_deps, event) }
}
/// The node's memory is handed out at once (a real driver reserves its address at once too).
pub unsafe fn graph_add_mem_alloc_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *mut MemAllocNodeParams,
) -> CUresult {
    // SAFETY: the caller's parameters.
    let Some(p) = (unsafe { params.as_mut() }) else { return CUDA_ERROR_INVALID_VALUE };
    match unsafe { add_node(node, graph, deps, num_deps) } {
        OK => unsafe { device_alloc(&mut p.dptr, p.bytesize) },
        e => e,
    }
}
pub unsafe fn graph_add_mem_free_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    _dptr: CUdeviceptr,
) -> CUresult {
    unsafe { add_node(node, graph, deps, num_deps) }
}
pub unsafe fn graph_add_batch_mem_op_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *const c_void,
) -> CUresult {
    unsafe { add_node_with(params.cast(), node, graph, deps, num_deps) }
}
pub unsafe fn graph_add_node(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    num_deps: usize,
    params: *mut GraphNodeParams,
) -> CUresult {
    // SAFETY: the caller's parameters.
    match unsafe { params.as_ref() } {
        Some(p) if p.type_ == CU_GRAPH_NODE_TYPE_KERNEL => unsafe {
            graph_add_kernel_node(node, graph, deps, num_deps, &p.kernel)
        },
        _ => unsafe { add_node_with(params.cast_const().cast(), node, graph, deps, num_deps) },
    }
}
pub unsafe fn graph_add_node_v2(
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    edges: *const GraphEdgeData,
    num_deps: usize,
    params: *mut GraphNodeParams,
) -> CUresult {
    if !unsafe { edges_valid(edges, num_deps) } {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsafe { graph_add_node(node, graph, deps, num_deps, params) }
}
unsafe fn edges(graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, num: usize) -> CUresult {
    if let e @ 1.. = is_graph(graph) {
        return e;
    }
    if num > 0 && (from.is_null() || to.is_null()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for i in 0..num {
        // SAFETY: the caller's arrays of `num` nodes.
        let (f, t) = unsafe { (*from.add(i), *to.add(i)) };
        if is_node(f) != OK || is_node(t) != OK {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    OK
}
pub unsafe fn graph_add_dependencies(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    num: usize,
) -> CUresult {
    unsafe { edges(graph, from, to, num) }
}
pub unsafe fn graph_add_dependencies_v2(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    data: *const GraphEdgeData,
    num: usize,
) -> CUresult {
    if !unsafe { edges_valid(data, num) } {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsafe { edges(graph, from, to, num) }
}
/// Whether `n` edges' data (null: ordinary edges) is as the driver documents it: no port into
/// a node, reserved bytes zero, and a programmatic edge only from a kernel node's programmatic
/// or launch-order port.
unsafe fn edges_valid(data: *const GraphEdgeData, n: usize) -> bool {
    // SAFETY: null or the caller's array of `n` edges.
    let data = (!data.is_null()).then(|| unsafe { core::slice::from_raw_parts(data, n) });
    data.unwrap_or_default().iter().all(edge_valid)
}
fn edge_valid(edge: &GraphEdgeData) -> bool {
    let port = edge.from_port <= CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER;
    let programmatic = match edge.type_ {
        CU_GRAPH_DEPENDENCY_TYPE_DEFAULT => true,
        CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC => edge.from_port != CU_GRAPH_KERNEL_NODE_PORT_DEFAULT,
        _ => false,
    };
    port && programmatic && edge.to_port == 0 && edge.reserved == [0; 5]
}
pub unsafe fn graph_remove_dependencies(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    num: usize,
) -> CUresult {
    unsafe { edges(graph, from, to, num) }
}
pub unsafe fn graph_remove_dependencies_v2(
    graph: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    _edges: *const GraphEdgeData,
    num: usize,
) -> CUresult {
    unsafe { edges(graph, from, to, num) }
}
pub unsafe fn graph_destroy_node(node: CUgraphNode) -> CUresult {
    match state().objects.remove(&(node as usize)) {
        Some(Object::GraphNode { .. }) => OK,
        _ => CUDA_ERROR_INVALID_HANDLE,
    }
}
pub unsafe fn graph_kernel_node_set_params(node: CUgraphNode, params: *const KernelNodeParams) -> CUresult {
    if params.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        is_node(node)
    }
}
pub unsafe fn graph_memcpy_node_set_params(node: CUgraphNode, copy: *const Memcpy3D) -> CUresult {
    if copy.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        is_node(node)
    }
}
pub unsafe fn graph_memset_node_set_params(node: CUgraphNode, params: *const MemsetNodeParams) -> CUresult {
    if params.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        is_node(node)
    }
}
fn exec_node(exec: CUgraphExec, node: CUgraphNode) -> CUresult {
    match check(exec, |o| matches!(o, Object::GraphExec)) {
        OK => is_node(node),
        e => e,
    }
}
pub unsafe fn graph_exec_kernel_node_set_params(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const KernelNodeParams,
) -> CUresult {
    if params.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let status = exec_node(exec, node);
    if status == OK {
        // SAFETY: the caller's parameters.
        unsafe { graphs::exec_params(exec, node, &*params) };
    }
    status
}
pub unsafe fn graph_exec_memcpy_node_set_params(
    exec: CUgraphExec,
    node: CUgraphNode,
    copy: *const Memcpy3D,
    _ctx: CUcontext,
) -> CUresult {
    if copy.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        exec_node(exec, node)
    }
}
pub unsafe fn graph_exec_memset_node_set_params(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const MemsetNodeParams,
    _ctx: CUcontext,
) -> CUresult {
    if params.is_null() {
        CUDA_ERROR_INVALID_VALUE
    } else {
        exec_node(exec, node)
    }
}
fn exec_update(exec: CUgraphExec, graph: CUgraph) -> CUresult {
    match check(exec, |o| matches!(o, Object::GraphExec)) {
        OK => is_graph(graph),
        e => e,
    }
}
pub unsafe fn graph_exec_update(exec: CUgraphExec, graph: CUgraph, _info: *mut c_void) -> CUresult {
    exec_update(exec, graph)
}
pub unsafe fn graph_exec_update_v1(
    exec: CUgraphExec,
    graph: CUgraph,
    _error_node: *mut CUgraphNode,
    _result: *mut u32,
) -> CUresult {
    exec_update(exec, graph)
}
pub unsafe fn graph_upload(exec: CUgraphExec, stream: CUstream) -> CUresult {
    unsafe { graph_launch(exec, stream) }
}

// ---- Entry points -----------------------------------------------------------------------

pub unsafe fn get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    unsafe { getproc::get_proc_address(symbol, pfn, cuda_version, flags, core::ptr::null_mut()) }
}
pub unsafe fn get_proc_address_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut u32,
) -> CUresult {
    unsafe { getproc::get_proc_address(symbol, pfn, cuda_version, flags, symbol_status) }
}

/// Whether `ptr` is stand-in memory of the given kind.
pub fn memory_kind(ptr: u64) -> Option<MemoryKind> {
    let s = state();
    s.allocations.range(..=ptr).next_back().and_then(|(&base, a)| (ptr < base + a.size.max(1)).then_some(a.kind))
}
