//! The shape of an exported hook: what every intercepted call goes through before its
//! handler sees it. [`export_hooks!`] expands the driver-API table into one exported C
//! function per name, of that exact name and signature.

/// Expands the driver-API table (`driver_api!(export_hooks)`) into the exported hooks,
/// each calling the invoking module's `before_call`, the handler named after its family
/// there, then its `after_call`.
macro_rules! export_hooks {
    ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
        $( $crate::intercept::exports::export_hooks!(@family $family [$($name),+] ($($arg : $ty),*)); )*
    };
    (@family $family:ident [$($name:ident),+] $args:tt) => {
        $( $crate::intercept::exports::export_hooks!(@export $family $name $args); )+
    };
    (@export $family:ident $name:ident ($($arg:ident : $ty:ty),*)) => {
        #[unsafe(no_mangle)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            use $crate::intercept::{driver, first_call, stats, variants};
            let started = streamsan::phases::now();
            let call = variants::Call { variant: variants::Variant::$name };
            first_call::enter();
            stats::count(call.variant);
            // Measuring the shim (`experiments`): the driver only.
            const FORWARDING: u32 = $crate::intercept::experiments::forwarding(stringify!($family));
            let forward = $crate::intercept::experiments::leaves_out(FORWARDING);
            let entered = !forward && before_call();
            let status = match driver::real_function(call.variant) {
                // SAFETY: as the handler's call below.
                Some(real) if forward => unsafe {
                    core::mem::transmute::<*mut core::ffi::c_void, variants::real::$family>(real)($($arg),*)
                },
                // SAFETY: the driver exports this name with this signature (cuda.h).
                Some(real) => unsafe {
                    $family(&call, core::mem::transmute::<*mut core::ffi::c_void, variants::real::$family>(real), $($arg),*)
                },
                None => driver::missing_function(&call),
            };
            if !forward {
                after_call(entered);
            }
            if let Some(started) = started {
                stats::timed(call.variant, streamsan::phases::since(started));
            }
            status
        }
    };
}

pub(crate) use export_hooks;
