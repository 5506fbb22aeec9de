//! How NCCL calls reach the shim: the NCCL names it exports ([`streamsan_driver_api::nccl_api!`]
//! numbered, typed and given their hooks' shape, as [`super::variants`] and [`super::exports`]
//! do for the driver) and the real NCCL behind them, which the shim never loads itself.

use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::AtomicPtr;

use streamsan_driver_api::*;

use super::driver::{lookup_in, real_dlsym, resolved_once};

/// What the shim knows about one exported NCCL name.
pub struct NcclInfo {
    pub name: &'static CStr,
    /// The same name, as a string.
    pub api: &'static str,
    /// The address of the exported hook.
    pub hook: *const (),
}

// SAFETY: the table is immutable; `hook` is a code address.
unsafe impl Sync for NcclInfo {}

/// One NCCL call in flight.
pub struct NcclCall {
    pub variant: NcclVariant,
}

impl NcclCall {
    pub fn name(&self) -> &'static str {
        NCCL_VARIANTS[self.variant as usize].api
    }
}

macro_rules! define_nccl_variants {
    ($( $family:ident [$name:ident] ($($arg:ident : $ty:ty),*); )*) => {
        /// Every exported NCCL name, in table order.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u16)]
        pub enum NcclVariant { $($name,)* }

        /// How many NCCL names the shim exports.
        pub const NCCL_COUNT: usize = [$(stringify!($name),)*].len();

        /// Indexed by `NcclVariant as usize`.
        pub static NCCL_VARIANTS: [NcclInfo; NCCL_COUNT] = [
            $(
                NcclInfo {
                    // SAFETY: the literal ends in exactly one NUL.
                    name: unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    api: stringify!($name),
                    hook: exported::$name as *const (),
                },
            )*
        ];

        /// The C type of each NCCL function, by family: a handler's `real` argument.
        #[allow(non_camel_case_types)]
        pub mod nccl_real {
            use super::*;
            $( pub type $family = unsafe extern "C" fn($($ty),*) -> NcclResult; )*
        }

        /// The shim's own NCCL exports, declared for their addresses only: the handlers'
        /// layer defines them in the shape of [`export_nccl_hooks!`].
        #[allow(non_snake_case)]
        mod exported {
            use super::*;
            extern "C" {
                $( pub fn $name($($arg: $ty),*) -> NcclResult; )*
            }
        }
    };
}

nccl_api!(define_nccl_variants);

/// The NCCL variant exported under `name`, if streamsan hooks it.
pub fn variant_by_name(name: &[u8]) -> Option<&'static NcclInfo> {
    NCCL_VARIANTS.iter().find(|v| v.name.to_bytes() == name)
}

/// The NCCL library's soname, as programs and frameworks open it.
const LIBNCCL: &CStr = c"libnccl.so.2";

/// Finds `name` in the real NCCL: after the shim in the global scope, else in the
/// `libnccl.so.2` the process has loaded. Null if neither has it.
pub fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT from the shim: the definitions after it.
    let next = unsafe { lookup_in(libc::RTLD_NEXT, name) };
    if !next.is_null() {
        return next;
    }
    // SAFETY: a NUL-terminated soname; RTLD_NOLOAD opens nothing new. The reference it takes
    // is kept: NCCL stays loaded while the program uses it, and a later lookup finds it again.
    let handle = unsafe { libc::dlopen(LIBNCCL.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() || real_dlsym().is_none() {
        return core::ptr::null_mut();
    }
    // SAFETY: a handle dlopen returned.
    unsafe { lookup_in(handle, name) }
}

static REAL: [AtomicPtr<c_void>; NCCL_COUNT] = [const { AtomicPtr::new(core::ptr::null_mut()) }; NCCL_COUNT];

/// The real NCCL function behind an exported name, resolved once.
#[inline]
pub fn real_function(variant: NcclVariant) -> Option<*mut c_void> {
    resolved_once(&REAL[variant as usize], || lookup(NCCL_VARIANTS[variant as usize].name))
}

/// `ncclSystemError`: what a hook returns when no loaded NCCL has its function (a program
/// linked against a newer NCCL than the one it runs with).
const NCCL_SYSTEM_ERROR: NcclResult = 2;

pub fn missing_function(call: &NcclCall) -> NcclResult {
    super::diag::warn(&format!("no loaded NCCL exports {}; the call fails with ncclSystemError", call.name()));
    NCCL_SYSTEM_ERROR
}

type CommQuery = unsafe extern "C" fn(NcclComm, *mut c_int) -> NcclResult;

/// `ncclCommCount` or `ncclCommUserRank` of `comm`, if NCCL answers.
fn ask(query: &'static AtomicPtr<c_void>, name: &CStr, comm: NcclComm) -> Option<c_int> {
    let f = resolved_once(query, || lookup(name))?;
    // SAFETY: nccl.h's signature for both queries.
    let f = unsafe { core::mem::transmute::<*mut c_void, CommQuery>(f) };
    let mut value: c_int = 0;
    // SAFETY: the program's communicator, which NCCL accepted for the call; a valid out-pointer.
    (unsafe { f(comm, &mut value) } == NCCL_SUCCESS).then_some(value)
}

/// How many ranks `comm` has (`ncclCommCount`).
pub fn comm_count(comm: NcclComm) -> Option<c_int> {
    static QUERY: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
    ask(&QUERY, c"ncclCommCount", comm)
}

/// This process's rank in `comm` (`ncclCommUserRank`).
pub fn comm_user_rank(comm: NcclComm) -> Option<c_int> {
    static QUERY: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
    ask(&QUERY, c"ncclCommUserRank", comm)
}

/// Expands the NCCL table (`nccl_api!(export_nccl_hooks)`) into the exported hooks, each
/// calling the handler named after its family in the invoking module, as
/// [`super::exports::export_hooks!`] does for the driver.
macro_rules! export_nccl_hooks {
    ($( $family:ident [$name:ident] ($($arg:ident : $ty:ty),*); )*) => {
        $(
            #[unsafe(no_mangle)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> NcclResult {
                use $crate::intercept::{first_call, nccl, stats};
                let call = nccl::NcclCall { variant: nccl::NcclVariant::$name };
                first_call::enter();
                stats::count_nccl(call.variant);
                match nccl::real_function(call.variant) {
                    // SAFETY: NCCL exports this name with this signature (nccl.h).
                    Some(real) => unsafe {
                        $family(&call, core::mem::transmute::<*mut core::ffi::c_void, nccl::nccl_real::$family>(real), $($arg),*)
                    },
                    None => nccl::missing_function(&call),
                }
            }
        )*
    };
}

pub(crate) use export_nccl_hooks;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nccl_name_is_found_by_its_name() {
        for v in NCCL_VARIANTS.iter() {
            assert_eq!(variant_by_name(v.name.to_bytes()).map(|f| f.name), Some(v.name));
        }
        assert!(variant_by_name(b"ncclCommCount").is_none());
    }
}
