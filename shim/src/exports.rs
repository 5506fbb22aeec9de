//! The exported hooks, generated from the driver-API table.
//!
//! For every name in [`streamsan_driver_api::driver_api!`] this module exports a C function
//! of that exact name and signature. Each one counts itself, finds the real driver's
//! function of the same name, and hands the call to the family's handler in
//! [`crate::hooks`], which decodes the arguments for the model and calls the real driver
//! exactly once with the caller's arguments; then lets [`crate::host_guard`] lift the guards
//! of copies the call synchronized with.
//!
//! [`Variant`] numbers the names; [`VARIANTS`] describes each one (its C name, whether it
//! is a per-thread-default-stream variant, its family, the address of its hook). The
//! `dlsym` and `cuGetProcAddress` interposers answer with these addresses.

use core::ffi::CStr;
use streamsan_driver_api::*;

use crate::driver;
use crate::hooks;
use crate::host_guard;
use crate::runtime;
use crate::stats;

/// What the shim knows about one exported name.
pub struct VariantInfo {
    pub name: &'static CStr,
    /// The same name, as a string.
    pub api: &'static str,
    /// `_ptsz`/`_ptds`: handle 0 means the calling thread's per-thread default stream.
    pub per_thread: bool,
    /// The table family, e.g. `memcpy_htod` for `cuMemcpyHtoD_v2_ptds`.
    pub family: &'static str,
    /// The address of the exported hook.
    pub hook: *const (),
}

// SAFETY: the table is immutable; `hook` is a code address.
unsafe impl Sync for VariantInfo {}

/// One hooked call in flight: which exported name the program called.
pub struct Call {
    pub variant: Variant,
}

impl Call {
    pub fn info(&self) -> &'static VariantInfo {
        &VARIANTS[self.variant as usize]
    }

    /// Whether a null stream handle means the per-thread default stream for this entry point.
    pub fn per_thread(&self) -> bool {
        self.info().per_thread
    }

    pub fn name(&self) -> &'static str {
        self.info().api
    }
}

macro_rules! define_hooks {
    ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
        /// Every exported name, in table order.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u16)]
        pub enum Variant { $($($name,)+)* }

        /// How many names the shim exports.
        pub const VARIANT_COUNT: usize = [$($(stringify!($name),)+)*].len();

        /// Indexed by `Variant as usize`.
        pub static VARIANTS: [VariantInfo; VARIANT_COUNT] = [
            $($(
                VariantInfo {
                    // SAFETY: the literal ends in exactly one NUL.
                    name: unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    api: stringify!($name),
                    per_thread: is_per_thread_name(stringify!($name)),
                    family: stringify!($family),
                    hook: $name as *const (),
                },
            )+)*
        ];

        $( define_hooks!(@family $family [$($name),+] ($($arg : $ty),*)); )*
    };
    (@family $family:ident [$($name:ident),+] $args:tt) => {
        $( define_hooks!(@export $family $name $args); )+
    };
    (@export $family:ident $name:ident ($($arg:ident : $ty:ty),*)) => {
        #[unsafe(no_mangle)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            type Real = unsafe extern "C" fn($($ty),*) -> CUresult;
            let call = Call { variant: Variant::$name };
            runtime::start();
            stats::count(call.variant);
            let status = match driver::real_function(call.variant) {
                // SAFETY: the driver exports this name with this signature (cuda.h).
                Some(real) => unsafe {
                    hooks::$family(&call, core::mem::transmute::<*mut core::ffi::c_void, Real>(real), $($arg),*)
                },
                None => driver::missing_function(&call),
            };
            host_guard::after_call();
            status
        }
    };
}

driver_api!(define_hooks);

/// The variant exported under `name`, if streamsan hooks it. A linear scan: `dlsym` is not
/// a hot path, and this allocates nothing, which matters inside `dlsym`.
pub fn variant_by_name(name: &[u8]) -> Option<&'static VariantInfo> {
    VARIANTS.iter().find(|v| v.name.to_bytes() == name)
}

/// The name with its version and per-thread suffixes removed: `cuMemcpyDtoH_v2_ptds` and
/// `cuMemcpyDtoH` both give `cuMemcpyDtoH`. `cuGetProcAddress` takes such base names.
pub fn base_name(name: &[u8]) -> &[u8] {
    let mut name = name;
    for suffix in [&b"_ptsz"[..], b"_ptds"] {
        if let Some(stripped) = name.strip_suffix(suffix) {
            name = stripped;
        }
    }
    if let Some(pos) = name.iter().rposition(|&c| c == b'_') {
        let tail = &name[pos + 1..];
        if tail.len() >= 2 && tail[0] == b'v' && tail[1..].iter().all(u8::is_ascii_digit) {
            name = &name[..pos];
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_is_found_by_its_name() {
        for v in VARIANTS.iter() {
            let found = variant_by_name(v.name.to_bytes()).expect("name in table");
            assert_eq!(found.name, v.name);
        }
        assert!(variant_by_name(b"cuDeviceGetName").is_none());
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = VARIANTS.iter().map(|v| v.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), VARIANT_COUNT);
    }

    #[test]
    fn base_names_drop_version_and_per_thread_suffixes() {
        assert_eq!(base_name(b"cuMemcpyDtoH_v2_ptds"), b"cuMemcpyDtoH");
        assert_eq!(base_name(b"cuLaunchKernel_ptsz"), b"cuLaunchKernel");
        assert_eq!(base_name(b"cuStreamBeginCapture_v2"), b"cuStreamBeginCapture");
        assert_eq!(base_name(b"cuMemAllocAsync"), b"cuMemAllocAsync");
        assert_eq!(base_name(b"cuCtxCreate_v4"), b"cuCtxCreate");
    }
}
