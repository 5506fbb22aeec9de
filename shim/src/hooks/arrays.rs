//! CUDA arrays (`docs/semantics.md#allocation-and-free`, `#copies`): memory with a handle and
//! no address, allocated and freed like a buffer, and known to copies by their handle.
//!
//! The model keeps an array at keys of its own (`streamsan::model::buffers::ARRAY_KEYS`); this
//! module keeps, per live handle, those keys and the array's shape, from which the copies
//! ([`super::copies`]) find the bytes they touch. An array's layout in device memory is opaque
//! (tiled); a race is about elements, not where the driver puts them, so the model takes the
//! array as its elements in row-major order (`width` x `height` x `depth` elements of the
//! format's size). For a format whose element size cuda.h does not give (block-compressed,
//! YUV), an array counts one byte per element and every copy to or from it covers all of it.
//! Mipmapped arrays, their levels, the planes of a multi-planar array and arrays from
//! graphics interop are not followed: a copy to or from a handle not made here leaves that
//! side untracked.

use std::sync::OnceLock;

use streamsan::hash::{fast_map, FastMap};
use streamsan::model::FreeOn;
use streamsan_driver_api::*;

use super::model::model;
use super::{ok, origin};
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
    let Some(&handle) = (unsafe { handle.as_ref() }) else { return };
    let shape = Array::new(width, height, depth, element);
    let key = model().alloc_array(handle as u64, shape.size, driver::current_context(), &origin(call));
    live().insert(handle as u64, Array { key, ..shape });
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
    if let Some((_, gone)) = live().remove(&(array as u64)) {
        model().free(gone.key, FreeOn::Synchronous { ctx: driver::current_context() }, &origin(call));
    }
    unsafe { real(array) }
}
