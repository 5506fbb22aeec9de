//! The ways out that skip `exit`'s handlers (`_exit`, `_Exit`, `quick_exit`) and the `exec`
//! family, interposed so that the report is written first; the program's status is kept
//! unless it would claim success with races found. A process that `exec`s tells the image
//! that follows, in its environment, that the report at its path is taken ([`EXECED`]).

use core::ffi::{c_char, c_int, c_void, CStr};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use streamsan::report::run::Event;

use super::reports::{self, EXECED};
use super::watcher;
use crate::intercept::first_call;
use crate::intercept::options::options;

/// The process whose report this is: set at load and in a forked child. A `vfork` child
/// shares the parent's memory and runs no fork handler; it reports nothing.
static OWNER: AtomicI32 = AtomicI32::new(0);
/// The process is on its way out and its report written: `exit` calls `_exit` after its
/// handlers, and streamsan's own ending goes through here too.
static ENDED: AtomicBool = AtomicBool::new(false);

/// At load, and in a forked child at the fork.
pub fn owned_by_this_process() {
    // SAFETY: getpid(2) is async-signal-safe.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// After `exit`'s handlers wrote the report: the `_exit` that follows writes nothing more.
pub fn ended() {
    ENDED.store(true, Ordering::Relaxed);
}

/// Whether this is the process that loaded the shim (or a forked child), not a `vfork` child.
fn this_process() -> bool {
    // SAFETY: getpid(2).
    OWNER.load(Ordering::Relaxed) == unsafe { libc::getpid() }
}

/// Whether this process called the driver and has a report to write on its way out.
fn reports() -> bool {
    first_call::called() && !ENDED.load(Ordering::Relaxed) && this_process()
}

/// Writes the report now, through the watcher (the caller may be a signal handler that
/// interrupted a thread holding the model's locks), or on this thread when there is none.
/// The races it holds.
fn write_report() -> usize {
    watcher::report_before_ending().unwrap_or_else(|| {
        let sink = reports::sink();
        let races = sink.write();
        sink.to_stderr_if_unwritten();
        races
    })
}

/// The status to end with: the program's, unless it claims success with races found.
fn final_status(status: c_int) -> c_int {
    if !reports() {
        return status;
    }
    ended();
    let races = write_report();
    if status == 0 && races > 0 {
        options().exitcode
    } else {
        status
    }
}

/// Interposed: the report, then the C library's `_exit`.
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    reports::exit_group(final_status(status))
}

/// Interposed: as `_exit`.
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    reports::exit_group(final_status(status))
}

/// Interposed: the report, then the C library's `quick_exit`, which runs the program's
/// `at_quick_exit` handlers.
#[unsafe(no_mangle)]
pub extern "C" fn quick_exit(status: c_int) -> ! {
    let status = final_status(status);
    // SAFETY: RTLD_NEXT from the shim finds the C library's; it takes this signature.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"quick_exit".as_ptr()) };
    if next.is_null() {
        reports::exit_group(status)
    }
    let next: extern "C" fn(c_int) -> ! = unsafe { core::mem::transmute(next) };
    next(status)
}

/// What the `exec` family receives.
pub type Argv = *const *const c_char;

extern "C" {
    /// The process's environment, which `execv` and `execvp` pass on.
    static environ: Argv;
}

/// The C library's function `name`, found after the shim.
fn next(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT from the shim finds the C library's.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// Before an `exec` of `program`: the run told if the environment no longer preloads the
/// shim; the report written, and `envp` with [`EXECED`] counting this image, so that the
/// next one does not meet this report at its path. `None`: `envp` as it is.
fn before_exec(program: impl FnOnce() -> String, envp: Argv) -> Option<(Vec<CString>, Vec<*const c_char>)> {
    if !this_process() {
        return None;
    }
    if !preloads_the_shim(envp) {
        reports::note(Event::Dropped { pid: std::process::id(), program: program() });
    }
    if !reports() {
        return None;
    }
    write_report();
    let pid = std::process::id();
    let n = reports::execs_before(pid) + 1;
    let mut owned = vec![CString::new(format!("{EXECED}={pid}:{n}")).ok()?];
    let mut i = 0;
    // SAFETY: `envp` is the caller's NULL-terminated array of NUL-terminated strings.
    while !envp.is_null() && !unsafe { *envp.add(i) }.is_null() {
        let entry = unsafe { CStr::from_ptr(*envp.add(i)) };
        if !entry.to_bytes().starts_with(format!("{EXECED}=").as_bytes()) {
            owned.push(entry.to_owned());
        }
        i += 1;
    }
    let pointers = owned.iter().map(|s| s.as_ptr()).chain([core::ptr::null()]).collect();
    Some((owned, pointers))
}

/// Whether `envp`'s `LD_PRELOAD` names the shim's file.
fn preloads_the_shim(envp: Argv) -> bool {
    let Some(shim) = shim_file_name() else { return true };
    let mut i = 0;
    // SAFETY: `envp` is the caller's NULL-terminated array of NUL-terminated strings.
    while !envp.is_null() && !unsafe { *envp.add(i) }.is_null() {
        let entry = unsafe { CStr::from_ptr(*envp.add(i)) }.to_bytes();
        if let Some(value) = entry.strip_prefix(b"LD_PRELOAD=") {
            return value.split(|&b| b == b':' || b == b' ').any(|p| p.ends_with(shim.as_bytes()));
        }
        i += 1;
    }
    false
}

/// The shim's own file name, as the dynamic loader found it.
fn shim_file_name() -> Option<String> {
    // SAFETY: dladdr fills `info` for an address inside the shim.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    if unsafe { libc::dladdr(shim_file_name as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    path.rsplit('/').next().map(str::to_string)
}

/// A program's path as the caller gave it.
fn named(path: *const c_char) -> String {
    if path.is_null() {
        return String::new();
    }
    // SAFETY: the caller's NUL-terminated path.
    unsafe { CStr::from_ptr(path) }.to_string_lossy().into_owned()
}

/// The environment to pass: `made` by [`before_exec`], or the caller's.
fn environment(made: &Option<(Vec<CString>, Vec<*const c_char>)>, envp: Argv) -> Argv {
    made.as_ref().map_or(envp, |(_, pointers)| pointers.as_ptr())
}

/// An `exec` function the C library lacks: fails as the kernel would for a missing call.
fn missing() -> c_int {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

type Execve = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
type Fexecve = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
type Execveat = unsafe extern "C" fn(c_int, *const c_char, Argv, Argv, c_int) -> c_int;

/// Interposed: the report, then the C library's `execve`.
///
/// # Safety
/// As `execve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let made = before_exec(|| named(path), envp);
    let f = next(c"execve");
    if f.is_null() {
        return missing();
    }
    // SAFETY: the C library's `execve`, with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, Execve>(f)(path, argv, environment(&made, envp)) }
}

/// Interposed: `execve` with the process's environment.
///
/// # Safety
/// As `execv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    // SAFETY: as the caller's `execv`.
    unsafe { execve(path, argv, environ) }
}

/// Interposed: the report, then the C library's `execvpe`.
///
/// # Safety
/// As `execvpe`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let made = before_exec(|| named(file), envp);
    let f = next(c"execvpe");
    if f.is_null() {
        return missing();
    }
    // SAFETY: the C library's `execvpe`, with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, Execve>(f)(file, argv, environment(&made, envp)) }
}

/// Interposed: `execvpe` with the process's environment.
///
/// # Safety
/// As `execvp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    // SAFETY: as the caller's `execvp`.
    unsafe { execvpe(file, argv, environ) }
}

/// Interposed: the report, then the C library's `fexecve`.
///
/// # Safety
/// As `fexecve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    let made = before_exec(|| format!("descriptor {fd}"), envp);
    let f = next(c"fexecve");
    if f.is_null() {
        return missing();
    }
    // SAFETY: the C library's `fexecve`, with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, Fexecve>(f)(fd, argv, environment(&made, envp)) }
}

/// Interposed: the report, then the C library's `execveat`.
///
/// # Safety
/// As `execveat`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execveat(dir: c_int, path: *const c_char, argv: Argv, envp: Argv, flags: c_int) -> c_int {
    let made = before_exec(|| named(path), envp);
    let f = next(c"execveat");
    if f.is_null() {
        return missing();
    }
    // SAFETY: the C library's `execveat`, with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, Execveat>(f)(dir, path, argv, environment(&made, envp), flags) }
}
