//! The handlers: what each API family means to streamsan.
//!
//! A handler receives the call, the real driver function and the caller's arguments; it
//! calls the real function exactly once, with exactly those arguments, and returns its
//! status unchanged. Around that call it tells the model what happened.
//!
//! Every family starts as a plain forwarder (generated in `forward`, glob-imported
//! below). A family gets its meaning by defining a handler of the same name in one of the
//! topic modules, which shadows the forwarder.

use streamsan_driver_api::*;

mod forward {
    use super::*;
    use crate::exports::Call;

    macro_rules! define_forwarders {
        ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
            $(
                #[allow(dead_code)]
                #[inline]
                pub unsafe fn $family(_call: &Call, real: unsafe extern "C" fn($($ty),*) -> CUresult, $($arg: $ty),*) -> CUresult {
                    // SAFETY: the caller's own arguments, passed on unchanged.
                    unsafe { real($($arg),*) }
                }
            )*
        };
    }
    driver_api!(define_forwarders);
}

mod entry_points;

pub use entry_points::{get_proc_address, get_proc_address_v2};
#[allow(unused_imports)]
pub use forward::*;
