//! The device patch (`patch/footprint.cu`, built into `footprint.fatbin` by `patch/build.sh`)
//! and which instruction classes call which of its functions.

use core::ffi::CStr;

use crate::api;

/// The patch image, added to each context that runs measured code.
pub static IMAGE: &[u8] = include_bytes!("../patch/footprint.fatbin");

/// Each instruction class the engine patches, and the patch function it calls.
pub const INSTRUCTIONS: &[(u32, &CStr)] = &[
    (api::INSTRUCTION_GLOBAL_MEMORY_ACCESS, c"streamsan_footprint_access"),
    (api::INSTRUCTION_MEMCPY_ASYNC, c"streamsan_footprint_memcpy_async"),
];

/// Asks the API to patch each of [`INSTRUCTIONS`] in `module` (before `sanitizerPatchModule`).
///
/// # Safety
/// `module` is a module the driver reported loaded; the caller serializes patching calls.
pub unsafe fn instruct(api: &api::Api, module: api::Handle) {
    for (instruction, function) in INSTRUCTIONS {
        let function = floor(*instruction).unwrap_or(function);
        // SAFETY: the caller's promise; a NUL-terminated name in the added image.
        unsafe { (api.patch_instructions)(*instruction, module, function.as_ptr()) };
    }
}

/// With the `experiments` feature and `STREAMSAN_FOOTPRINT_FLOOR` set, the function global
/// accesses call instead: one that records nothing, so that a run measures what patching
/// alone costs a program (the floor `exact` is compared with); with it set to `grouping`,
/// one that groups a warp's lanes as recording does, at every access, and leaves the table
/// alone.
#[cfg(feature = "experiments")]
fn floor(instruction: u32) -> Option<&'static CStr> {
    let level = std::env::var_os("STREAMSAN_FOOTPRINT_FLOOR")?;
    (instruction == api::INSTRUCTION_GLOBAL_MEMORY_ACCESS).then_some(match level.to_str() {
        Some("grouping") => c"streamsan_footprint_grouping",
        _ => c"streamsan_footprint_nothing",
    })
}

/// Without the `experiments` feature: never.
#[cfg(not(feature = "experiments"))]
#[inline(always)]
fn floor(_instruction: u32) -> Option<&'static CStr> {
    None
}
