//! Calls every hooked driver name once and prints `name(arg=value, ...) -> status`; with the
//! argument `nccl`, every hooked NCCL name instead.
//!
//! Each name is looked up with `dlsym` in `libcuda.so.1` or `libnccl.so.2`, opened with
//! `dlopen` as PyTorch and CuPy open them (under the shim, the lookup returns the hook) and called with sentinel arguments: distinct small integers, and pointers to
//! distinct zeroed blocks, valid to read and write. The stand-in driver logs what it
//! received in the same format, so a test can check, line by line, that every argument
//! arrived unchanged and that every status came back unchanged.

use core::ffi::c_void;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

use streamsan_driver_api::*;

/// Makes the next distinctive value of a type.
trait Sentinel {
    fn make(k: &mut usize) -> Self;
}

macro_rules! integer_sentinel {
    ($($t:ty),*) => {$(
        impl Sentinel for $t {
            fn make(k: &mut usize) -> Self {
                *k += 1;
                (3 + 8 * (*k % 29)) as $t
            }
        }
    )*};
}
integer_sentinel!(u8, u16, u32, i32, u64, usize);

fn block() -> *mut c_void {
    // Zeroed, 4 KiB, never freed: the callee may read or write it.
    Box::into_raw(Box::new([0u64; 512])).cast()
}

impl<T> Sentinel for *mut T {
    fn make(_: &mut usize) -> Self {
        block().cast()
    }
}

impl<T> Sentinel for *const T {
    fn make(_: &mut usize) -> Self {
        block().cast_const().cast()
    }
}

/// Every user-data pointer a callback was called with.
static CALLBACK_DATA: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn host_fn(data: *mut c_void) {
    CALLBACK_DATA.store(data as usize, Ordering::SeqCst);
}

unsafe extern "C" fn stream_callback(_stream: CUstream, _status: CUresult, data: *mut c_void) {
    CALLBACK_DATA.store(data as usize, Ordering::SeqCst);
}

impl Sentinel for CUhostFn {
    fn make(_: &mut usize) -> Self {
        Some(host_fn)
    }
}

impl Sentinel for CUstreamCallback {
    fn make(_: &mut usize) -> Self {
        Some(stream_callback)
    }
}

/// `call_every_name!(fn_name; table...)` defines `fn_name(lib)`, calling every name of the
/// table (the driver's or NCCL's: both return a raw `u32` status) found in `lib`.
macro_rules! call_every_name {
    ($all:ident; $( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
        fn $all(lib: *mut c_void) {
            let mut k = 0usize;
            $( call_every_name!(@family lib k [$($name),+] ($($arg : $ty),*)); )*
        }
    };
    (@family $lib:ident $k:ident [$($name:ident),+] $args:tt) => {
        $( call_every_name!(@call $lib $k $name $args); )+
    };
    (@call $lib:ident $k:ident $name:ident ($($arg:ident : $ty:ty),*)) => {{
        let symbol = CString::new(stringify!($name)).unwrap();
        // SAFETY: a valid handle and name.
        let f = unsafe { libc::dlsym($lib, symbol.as_ptr()) };
        if f.is_null() {
            println!("{}: not found", stringify!($name));
        } else {
            $( let $arg: $ty = Sentinel::make(&mut $k); )*
            let line = render_call(stringify!($name), &[$((stringify!($arg), $arg.repr())),*]);
            CALLBACK_DATA.store(0, Ordering::SeqCst);
            // SAFETY: the driver's signature for this name (the table), valid arguments.
            let status = unsafe {
                core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> u32>(f)($($arg),*)
            };
            println!("{line} -> {status}");
            let data = CALLBACK_DATA.load(Ordering::SeqCst);
            if data != 0 {
                println!("{}: callback ran with user_data={:#x}", stringify!($name), data);
            }
        }
    }};
}

macro_rules! driver_calls {
    ($($table:tt)*) => { call_every_name!(call_driver; $($table)*); };
}
macro_rules! nccl_calls {
    ($($table:tt)*) => { call_every_name!(call_nccl; $($table)*); };
}
driver_api!(driver_calls);
nccl_api!(nccl_calls);

fn main() {
    let nccl = std::env::args().nth(1).is_some_and(|a| a == "nccl");
    let (name, call_all): (&core::ffi::CStr, fn(*mut c_void)) =
        if nccl { (c"libnccl.so.2", call_nccl) } else { (c"libcuda.so.1", call_driver) };
    // SAFETY: a NUL-terminated library name. RTLD_LOCAL (the default): the library's names
    // stay out of the global scope, as a framework's dlopen leaves them.
    let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
    if lib.is_null() {
        eprintln!("cannot open {}", name.to_string_lossy());
        std::process::exit(5);
    }
    call_all(lib);
}
