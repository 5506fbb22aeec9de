//! The interposed `dlsym`: a hooked driver or NCCL name is answered with its hook, whatever
//! handle it was looked up in; every other lookup goes to glibc's `dlsym` by a tail call, so
//! that glibc sees the original caller's return address. It allocates nothing and takes no
//! lock: it may run inside a library constructor, under glibc's loader lock.

use core::ffi::{c_char, c_void, CStr};

use super::driver;
use super::nccl;
use super::variants::variant_by_name;

/// [`decide`]'s answer "let glibc answer, as if the shim were not there".
const DEFER: usize = 0;
/// [`decide`]'s answer "the symbol does not exist": return NULL.
const NOT_FOUND: usize = 1;

/// The exported `dlsym`: `decide`, then either return its answer or tail-call glibc.
///
/// # Safety
/// Called as `dlsym(3)`.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        // Keep the arguments; three pushes keep the stack 16-byte aligned for the call.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {decide}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "cmp rax, {defer}",
        "je 2f",
        "cmp rax, {not_found}",
        "je 3f",
        "ret",
        "2:",
        // Tail call: glibc sees our caller's return address on the stack.
        "jmp qword ptr [rip + {real}]",
        "3:",
        "xor eax, eax",
        "ret",
        decide = sym decide,
        real = sym driver::REAL_DLSYM,
        defer = const DEFER,
        not_found = const NOT_FOUND,
    )
}

/// Decides a `dlsym` lookup: a hook address, [`DEFER`] or [`NOT_FOUND`].
extern "C" fn decide(handle: *mut c_void, symbol: *const c_char) -> usize {
    let Some(real_dlsym) = driver::real_dlsym() else {
        return NOT_FOUND;
    };
    if symbol.is_null() || handle == libc::RTLD_NEXT {
        return DEFER;
    }
    // SAFETY: dlsym's contract: a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let Some(hook) = hook_named(name) else {
        return DEFER;
    };
    // SAFETY: valid dlsym arguments.
    let found = unsafe { real_dlsym(handle, symbol) };
    if found.is_null() {
        // Absent where the program looked: glibc answers again, and sets dlerror.
        return DEFER;
    }
    if found as *const () == hook {
        // The lookup reached the shim itself (RTLD_DEFAULT). Answer as the process would
        // without the shim: the next definition after it, if there is one.
        // SAFETY: valid dlsym arguments; the caller is the shim, so RTLD_NEXT starts after it.
        let next = unsafe { real_dlsym(libc::RTLD_NEXT, symbol) };
        if next.is_null() {
            return NOT_FOUND;
        }
    }
    hook as usize
}

/// The shim's hook for a hooked driver or NCCL name.
fn hook_named(name: &[u8]) -> Option<*const ()> {
    if name.starts_with(b"cu") {
        variant_by_name(name).map(|v| v.hook)
    } else if name.starts_with(b"nccl") {
        nccl::variant_by_name(name).map(|v| v.hook)
    } else {
        None
    }
}
