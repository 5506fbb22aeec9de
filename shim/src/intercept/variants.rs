//! The names the shim exports, generated from the driver-API table: [`Variant`] numbers them,
//! [`VARIANTS`] describes each one, and [`real`] gives each family's C type, for the handlers.

use core::ffi::CStr;
use streamsan_driver_api::*;

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

macro_rules! define_variants {
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
                    hook: exported::$name as *const (),
                },
            )+)*
        ];

        /// The C type of each family's driver functions, by family: what a handler's `real`
        /// argument is.
        #[allow(non_camel_case_types)]
        pub mod real {
            use super::*;
            $( pub type $family = unsafe extern "C" fn($($ty),*) -> CUresult; )*
        }

        /// The shim's own exports, declared here for their addresses only: the handlers'
        /// layer defines them ([`super::exports`] gives their shape), and the
        /// loader resolves these names to those definitions.
        #[allow(non_snake_case, clippy::duplicated_attributes)]
        mod exported {
            use super::*;
            $( define_variants!(@declare [$($name),+] ($($arg : $ty),*)); )*
        }
    };
    (@declare [$($name:ident),+] $args:tt) => {
        $( define_variants!(@declare_one $name $args); )+
    };
    (@declare_one $name:ident ($($arg:ident : $ty:ty),*)) => {
        extern "C" {
            pub fn $name($($arg: $ty),*) -> CUresult;
        }
    };
}

driver_api!(define_variants);

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
