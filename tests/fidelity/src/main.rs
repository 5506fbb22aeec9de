//! Calls every hooked driver name once and prints `name(arg=value, ...) -> status`.
//!
//! Each name is looked up with `dlsym` in `libcuda.so.1` (under the shim, the lookup returns
//! the hook) and called with sentinel arguments: distinct small integers, and pointers to
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

impl Sentinel for IpcMemHandle {
    fn make(k: &mut usize) -> Self {
        let mut reserved = [0u8; 64];
        reserved[..8].copy_from_slice(&(u64::make(k)).to_le_bytes());
        IpcMemHandle { reserved }
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

macro_rules! call_every_name {
    ($( $family:ident [$($name:ident),+] ($($arg:ident : $ty:ty),*); )*) => {
        fn call_all(lib: *mut c_void) {
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
                core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> CUresult>(f)($($arg),*)
            };
            println!("{line} -> {status}");
            let data = CALLBACK_DATA.load(Ordering::SeqCst);
            if data != 0 {
                println!("{}: callback ran with user_data={:#x}", stringify!($name), data);
            }
        }
    }};
}

driver_api!(call_every_name);

fn main() {
    // SAFETY: a NUL-terminated library name.
    let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
    if lib.is_null() {
        eprintln!("cannot open libcuda.so.1");
        std::process::exit(5);
    }
    call_all(lib);
}
