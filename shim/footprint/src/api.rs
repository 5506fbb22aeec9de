//! The Compute Sanitizer API (`compute-sanitizer/include/sanitizer*.h`), loaded at run time,
//! never linked: where it is absent the engine is off and [`load`] says why. Only what the
//! engine uses is declared, in the headers' layouts (CUDA 12.x and 13.x agree on them).

use core::ffi::{c_char, c_void, CStr};
use std::ffi::CString;
use std::path::{Path, PathBuf};

pub type SanitizerResult = u32;
pub const SANITIZER_SUCCESS: SanitizerResult = 0;
/// `sanitizerSubscribe` when a subscriber exists already: the process runs under
/// compute-sanitizer (or another tool built on the API).
pub const SANITIZER_ERROR_MAX_LIMIT_REACHED: SanitizerResult = 10;

pub type Handle = *mut c_void;
pub type Callback = unsafe extern "C" fn(userdata: *mut c_void, domain: u32, cbid: u32, data: *const c_void);

pub const DOMAIN_RESOURCE: u32 = 3;

pub const CBID_RESOURCE_CONTEXT_DESTROY_STARTING: u32 = 4;
pub const CBID_RESOURCE_MODULE_LOADED: u32 = 9;
pub const CBID_RESOURCE_MODULE_UNLOAD_STARTING: u32 = 10;

pub const INSTRUCTION_GLOBAL_MEMORY_ACCESS: u32 = 3;
pub const INSTRUCTION_MEMCPY_ASYNC: u32 = 14;

/// `Sanitizer_ResourceContextData`.
#[repr(C)]
pub struct ContextData {
    pub context: Handle,
    pub device: i32,
}

/// `Sanitizer_ResourceModuleData`: `cubin` is the code the driver loaded, valid only during
/// the callback.
#[repr(C)]
pub struct ModuleData {
    pub context: Handle,
    pub module: Handle,
    pub cubin_size: usize,
    pub cubin: *const c_char,
    pub library: Handle,
}

macro_rules! api {
    ($($field:ident: $name:literal fn($($arg:ty),*);)*) => {
        /// The functions, resolved from the loaded library.
        pub struct Api {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> SanitizerResult,)*
        }

        fn resolve(dlsym: Dlsym, handle: *mut c_void) -> Result<Api, String> {
            Ok(Api {
                $($field: {
                    // SAFETY: a handle dlopen returned; a NUL-terminated name.
                    let f = unsafe { dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
                    if f.is_null() {
                        return Err(format!("the Compute Sanitizer library lacks {}", $name));
                    }
                    // SAFETY: the header's signature for this name.
                    unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> SanitizerResult>(f) }
                },)*
            })
        }
    };
}

api! {
    subscribe: "sanitizerSubscribe" fn(*mut Handle, Callback, *mut c_void);
    enable_domain: "sanitizerEnableDomain" fn(u32, Handle, u32);
    add_patches: "sanitizerAddPatches" fn(*const c_void, Handle);
    patch_instructions: "sanitizerPatchInstructions" fn(u32, Handle, *const c_char);
    patch_module: "sanitizerPatchModule" fn(Handle);
    set_callback_data: "sanitizerSetCallbackData" fn(Handle, *const c_void);
    alloc: "sanitizerAlloc" fn(Handle, *mut *mut c_void, usize);
    memcpy_device_to_host: "sanitizerMemcpyDeviceToHost" fn(*mut c_void, *mut c_void, usize, Handle);
    memcpy_host_to_device_async: "sanitizerMemcpyHostToDeviceAsync" fn(*mut c_void, *mut c_void, usize, Handle);
    memset: "sanitizerMemset" fn(*mut c_void, i32, usize, Handle);
    stream_synchronize: "sanitizerStreamSynchronize" fn(Handle);
    get_stream_handle: "sanitizerGetStreamHandle" fn(Handle, Handle, *mut Handle);
    get_function_pc_and_size: "sanitizerGetFunctionPcAndSize" fn(Handle, *const c_char, *mut u64, *mut u64);
}

/// glibc's `dlsym` (the shim's own `dlsym` is interposed: the caller passes the real one).
pub type Dlsym = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The library's file name in a toolkit (`compute-sanitizer/`) and in the pip wheel
/// (`nvidia/cuda_sanitizer_api/lib/`).
pub const LIBRARY: &str = "libsanitizer-public.so";

/// Where to look, first to last: `STREAMSAN_SANITIZER_LIB` (a file), the toolkits named by
/// `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`, then the dynamic linker's own search.
pub fn candidates() -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(file) = std::env::var_os("STREAMSAN_SANITIZER_LIB") {
        found.push(PathBuf::from(file));
    }
    for root in ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from("/usr/local/cuda")])
    {
        found.push(root.join("compute-sanitizer").join(LIBRARY));
    }
    found.push(PathBuf::from(LIBRARY));
    found
}

/// Opens the first library of [`candidates`] that loads and has every function.
pub fn load(dlsym: Dlsym) -> Result<Api, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        if path.is_absolute() && !path.is_file() {
            continue;
        }
        match open(dlsym, &path) {
            Ok(api) => return Ok(api),
            Err(why) => tried.push(why),
        }
    }
    if tried.is_empty() {
        tried.push(format!("no {LIBRARY} in a CUDA toolkit (set STREAMSAN_SANITIZER_LIB, CUDA_HOME, or `pip install nvidia-cuda-sanitizer-api-cu12`)"));
    }
    Err(tried.join("; "))
}

fn open(dlsym: Dlsym, path: &Path) -> Result<Api, String> {
    let name =
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| format!("{} has a NUL byte", path.display()))?;
    // SAFETY: a NUL-terminated path. RTLD_NODELETE: its callbacks may run until exit.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE) };
    if handle.is_null() {
        // SAFETY: dlerror's string is valid until the next dl call on this thread.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown error".into()
        } else {
            unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
        };
        return Err(format!("cannot load {}: {why}", path.display()));
    }
    resolve(dlsym, handle)
}
