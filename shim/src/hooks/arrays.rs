//! CUDA arrays: memory with a handle and no address. Per live handle, its keys in the model
//! and its shape, from which copies ([`super::copies`]) find the bytes they touch, taken as
//! the array's elements in row-major order.

use std::sync::OnceLock;

use streamsan::hash::{fast_map, FastMap};
use streamsan::model::FreeOn;
use streamsan_driver_api::*;

use super::call::{ok, origin};
use super::model::model;
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// A live array: its keys in the model, and its shape.
#[derive(Clone, Copy, Debug)]
pub struct Array {
    /// Its first key.
    pub key: u64,
    /// Its bytes: every element, in row-major order.
    pub size: u64,
    /// Bytes per element, when the format gives it.
    pub element: Option<u64>,
    /// Bytes per row.
    pub row: u64,
    /// Rows per slice (at least 1).
    pub rows: u64,
}

impl Array {
    /// The shape of an array of `width` x `height` x `depth` elements (0: a dimension it does
    /// not have), its keys not yet known.
    fn new(width: usize, height: usize, depth: usize, element: Option<u64>) -> Array {
        let (width, rows, depth) = (width as u64, height.max(1) as u64, depth.max(1) as u64);
        let row = width * element.unwrap_or(1);
        Array { key: 0, size: row * rows * depth, element, row, rows }
    }

    /// The whole array, for a copy whose bytes in it cannot be placed.
    pub fn all(&self) -> (u64, u64) {
        (self.key, self.size)
    }

    /// The `bytes` bytes from byte `offset` (a copy of a 1D array: `cuMemcpyAtoD` and its
    /// kin), within the array; all of it when its element size is not known.
    pub fn linear(&self, offset: usize, bytes: usize) -> (u64, u64) {
        if self.element.is_none() {
            return self.all();
        }
        let start = (offset as u64).min(self.size);
        (self.key + start, (bytes as u64).min(self.size - start))
    }
}

/// Live arrays by handle.
fn live() -> &'static FastMap<u64, Array> {
    static LIVE: OnceLock<FastMap<u64, Array>> = OnceLock::new();
    LIVE.get_or_init(fast_map)
}

/// The live array of handle `array`, if this process made it.
pub fn find(array: CUarray) -> Option<Array> {
    live().get(&(array as u64)).map(|a| *a)
}

/// An array the driver made: registered with the model, then known by its handle.
unsafe fn created(call: &Call, handle: *mut CUarray, width: usize, height: usize, depth: usize, element: Option<u64>) {
    // SAFETY: the driver wrote the new array's handle.
    if let Some(&handle) = unsafe { handle.as_ref() } {
        register(call, handle as u64, Array::new(width, height, depth, element));
    }
}

fn register(call: &Call, handle: u64, shape: Array) {
    let key = model().alloc_array(handle, shape.size, driver::current_context(), &origin(call));
    live().insert(handle, Array { key, ..shape });
}

/// A synchronous free of the array of `handle`, forgotten first (see [`array_destroy`]).
fn destroyed(call: &Call, handle: u64) {
    if let Some((_, gone)) = live().remove(&handle) {
        model().free(gone.key, FreeOn::Synchronous { ctx: driver::current_context() }, &origin(call));
    }
}

pub unsafe fn array_create(
    call: &Call,
    real: real::array_create,
    handle: *mut CUarray,
    descriptor: *const ArrayDescriptor,
) -> CUresult {
    let status = unsafe { real(handle, descriptor) };
    // SAFETY: the caller's descriptor, which the driver accepted.
    if let (true, Some(d)) = (ok(status), unsafe { descriptor.as_ref() }) {
        let element = array_element_size(d.format, d.num_channels);
        unsafe { created(call, handle, d.width, d.height, 1, element) };
    }
    status
}

pub unsafe fn array_3d_create(
    call: &Call,
    real: real::array_3d_create,
    handle: *mut CUarray,
    descriptor: *const Array3DDescriptor,
) -> CUresult {
    let status = unsafe { real(handle, descriptor) };
    // SAFETY: as above.
    if let (true, Some(d)) = (ok(status), unsafe { descriptor.as_ref() }) {
        let element = array_element_size(d.format, d.num_channels);
        unsafe { created(call, handle, d.width, d.height, d.depth, element) };
    }
    status
}

/// `cuArrayDestroy`: a synchronous free. Told to the model and forgotten before the driver
/// destroys it: once destroyed, the driver may hand its handle to an array another thread
/// creates, whose entry this must not remove.
pub unsafe fn array_destroy(call: &Call, real: real::array_destroy, array: CUarray) -> CUresult {
    destroyed(call, array as u64);
    unsafe { real(array) }
}

/// A mipmapped array: the descriptor of its level 0, and the levels handed out so far.
struct Mipmap {
    descriptor: Array3DDescriptor,
    levels: Vec<u64>,
}

/// Live mipmapped arrays by handle.
fn mipmaps() -> &'static FastMap<u64, Mipmap> {
    static MIPMAPS: OnceLock<FastMap<u64, Mipmap>> = OnceLock::new();
    MIPMAPS.get_or_init(fast_map)
}

pub unsafe fn mipmapped_array_create(
    _call: &Call,
    real: real::mipmapped_array_create,
    handle: *mut CUmipmappedArray,
    descriptor: *const Array3DDescriptor,
    num_levels: c_uint,
) -> CUresult {
    let status = unsafe { real(handle, descriptor, num_levels) };
    if !ok(status) {
        return status;
    }
    // SAFETY: the driver wrote the handle; the caller's descriptor, which it accepted.
    if let (Some(&handle), Some(&descriptor)) = unsafe { (handle.as_ref(), descriptor.as_ref()) } {
        mipmaps().insert(handle as u64, Mipmap { descriptor, levels: Vec::new() });
    }
    status
}

/// The shape of level `level`: each dimension halved per level down to 1, but the layers of
/// a layered or cubemap array.
fn level_shape(d: &Array3DDescriptor, level: c_uint) -> Array {
    let halved = |n: usize| if n == 0 { 0 } else { n.checked_shr(level).unwrap_or(0).max(1) };
    let layers = d.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP) != 0;
    let depth = if layers { d.depth } else { halved(d.depth) };
    Array::new(halved(d.width), halved(d.height), depth, array_element_size(d.format, d.num_channels))
}

/// `cuMipmappedArrayGetLevel`: a level is registered when its handle is first handed out.
pub unsafe fn mipmapped_array_get_level(
    call: &Call,
    real: real::mipmapped_array_get_level,
    level_array: *mut CUarray,
    mipmap: CUmipmappedArray,
    level: c_uint,
) -> CUresult {
    let status = unsafe { real(level_array, mipmap, level) };
    if !ok(status) {
        return status;
    }
    // SAFETY: the driver wrote the level's handle.
    let Some(&handle) = (unsafe { level_array.as_ref() }) else { return status };
    if let Some(mut m) = mipmaps().get_mut(&(mipmap as u64)) {
        if !m.levels.contains(&(handle as u64)) {
            m.levels.push(handle as u64);
            register(call, handle as u64, level_shape(&m.descriptor, level));
        }
    }
    status
}

/// `cuMipmappedArrayDestroy`: a synchronous free of every level handed out.
pub unsafe fn mipmapped_array_destroy(
    call: &Call,
    real: real::mipmapped_array_destroy,
    mipmap: CUmipmappedArray,
) -> CUresult {
    if let Some((_, gone)) = mipmaps().remove(&(mipmap as u64)) {
        for level in gone.levels {
            destroyed(call, level);
        }
    }
    unsafe { real(mipmap) }
}
