//! A stand-in `libcuda.so.1` for machines without a GPU.
//!
//! It exports the driver's entry points under the driver's names (every name of the
//! hooked table, generated from `streamsan_driver_api::driver_api!`, plus the queries in
//! [`queries`]), answers `cuGetProcAddress` as the real driver does ([`getproc`]), hands out
//! real address ranges for allocations (pinned host memory as the driver's, with copies to
//! and from it completing at the program's next wait: [`pinned`]), declares kernels from PTX
//! text ([`ptx`]), logs every call with its arguments and can make any call fail ([`log`]),
//! and for benchmarks can give launches device time that synchronizes wait for ([`device_time`]).
//!
//! It is a test device, not a model of a GPU: it orders nothing, and what it shows about
//! ordering proves nothing about real hardware.

// The entry points are generated from the driver's table and keep its C signatures (up to
// 13 arguments); their safety contract is the driver's.
#![allow(clippy::too_many_arguments, clippy::missing_safety_doc)]

pub mod behaviour;
pub mod device;
pub mod device_time;
pub mod getproc;
pub mod graphs;
pub mod log;
pub mod pinned;
pub mod ptx;
pub mod queries;
pub mod sanitizer;

pub mod exports {
    //! The table's entry points, each logged and dispatched to [`crate::behaviour`].

    use std::sync::OnceLock;
    use streamsan_driver_api::*;

    /// A code address that can sit in a static table.
    #[derive(Clone, Copy)]
    pub struct Address(pub *const ());
    // SAFETY: code addresses are immutable.
    unsafe impl Sync for Address {}
    unsafe impl Send for Address {}

    macro_rules! standin_exports {
        ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
            $( standin_exports!(@family $family [$($name),+] ($($arg : $ty),*)); )*

            static TABLE: &[(&str, Address)] = &[$($((stringify!($name), Address($name as *const ())),)+)*];
        };
        (@family $family:ident [$($name:ident),+] $args:tt) => {
            $( standin_exports!(@export $family $name $args); )+
        };
        (@export $family:ident $name:ident ($($arg:ident : $ty:ty),*)) => {
            #[unsafe(no_mangle)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                crate::log::call(
                    stringify!($name),
                    || vec![$((stringify!($arg), $arg.repr())),*],
                    || unsafe { crate::behaviour::$family($($arg),*) },
                )
            }
        };
    }

    driver_api!(standin_exports);

    /// Every exported driver function: the table's and the queries.
    pub fn all() -> &'static [(&'static str, *const ())] {
        static ALL: OnceLock<Vec<(&'static str, usize)>> = OnceLock::new();
        let all =
            ALL.get_or_init(|| TABLE.iter().chain(crate::queries::QUERIES).map(|&(n, a)| (n, a.0 as usize)).collect());
        // SAFETY: (&str, usize) and (&str, *const ()) have the same layout.
        unsafe { &*(all.as_slice() as *const [(&'static str, usize)] as *const [(&'static str, *const ())]) }
    }
}
