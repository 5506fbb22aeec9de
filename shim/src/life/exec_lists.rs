//! `execl`, `execlp` and `execle`, whose arguments come as a NULL-terminated list rather than
//! an array: the C library builds the array and calls its internal `execve`, past the shim,
//! so they are interposed here and passed to the shim's own `execve` and `execvpe`
//! ([`super::exits`]). Rust cannot take a variable argument list, so a naked stub per
//! function saves the argument registers and calls [`streamsan_exec_list`] with them and the
//! caller's stack arguments (x86-64 only: elsewhere the C library's own functions run).

use core::ffi::{c_char, c_int};

use super::exits::{execve, execvpe, Argv};

extern "C" {
    static environ: Argv;
}

/// Which list function the stub stands for.
const EXECL: c_int = 0;
const EXECLP: c_int = 1;
const EXECLE: c_int = 2;

/// The arguments of a list function after `path`: the first five from the registers the stub
/// saved (`registers`), the rest from the caller's stack (`stack`).
struct List {
    registers: *const *const c_char,
    stack: *const *const c_char,
}

impl List {
    /// The `i`th argument after `path`.
    ///
    /// # Safety
    /// The caller passed at least `i + 1` arguments after `path`.
    unsafe fn get(&self, i: usize) -> *const c_char {
        // SAFETY: the caller's promise; the stub saved five registers.
        unsafe {
            if i < 5 {
                *self.registers.add(i)
            } else {
                *self.stack.add(i - 5)
            }
        }
    }
}

/// Called by the stubs (`sym`, so not exported): builds the argument array (and, for `execle`, takes the environment
/// after the list's NULL) and execs through the shim.
///
/// # Safety
/// `registers` and `stack` are the stub's, and the caller passed a NULL-terminated list.
unsafe extern "C" fn streamsan_exec_list(
    path: *const c_char,
    registers: *const *const c_char,
    stack: *const *const c_char,
    which: c_int,
) -> c_int {
    let list = List { registers, stack };
    let mut argv = Vec::new();
    // SAFETY: the list ends in NULL, as the caller promised.
    loop {
        let arg = unsafe { list.get(argv.len()) };
        argv.push(arg);
        if arg.is_null() {
            break;
        }
    }
    // SAFETY: `execle` passes the environment after the list's NULL.
    let envp = if which == EXECLE { (unsafe { list.get(argv.len()) }) as Argv } else { unsafe { environ } };
    // SAFETY: a NULL-terminated array, and the caller's path and environment.
    unsafe {
        if which == EXECLP {
            execvpe(path, argv.as_ptr(), envp)
        } else {
            execve(path, argv.as_ptr(), envp)
        }
    }
}

/// One stub: saves the five argument registers after `path`, 8 more bytes keeping the stack
/// 16-byte aligned at the call, then calls `streamsan_exec_list(path, saved, caller's stack
/// arguments, which)`. Declared as taking `path` alone: the rest are read from where the
/// calling convention leaves them.
macro_rules! stub {
    ($name:ident, $which:literal) => {
        /// Interposed (x86-64): see the module's header.
        ///
        /// # Safety
        /// As the C library's function of this name.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(_path: *const c_char) -> c_int {
            core::arch::naked_asm!(
                "sub rsp, 56",
                "mov [rsp], rsi",
                "mov [rsp + 8], rdx",
                "mov [rsp + 16], rcx",
                "mov [rsp + 24], r8",
                "mov [rsp + 32], r9",
                "mov rsi, rsp",
                "lea rdx, [rsp + 64]",
                concat!("mov ecx, ", $which),
                "call {exec_list}",
                "add rsp, 56",
                "ret",
                exec_list = sym streamsan_exec_list,
            )
        }
    };
}

stub!(execl, "0");
stub!(execlp, "1");
stub!(execle, "2");

const _: () = assert!(EXECL == 0 && EXECLP == 1 && EXECLE == 2, "the stubs' numbers");
