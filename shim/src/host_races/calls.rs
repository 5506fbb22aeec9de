//! The C library's calls that copy between a file or socket and the program's memory,
//! checked against the guarded pages before they run, as a fault there would be ([`check`]):
//! the kernel does not fault on a protected page, it fails the call with `EFAULT`.

use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

use streamsan::model::op::Mode;

use super::fault::{self, Verdict};
use super::table::{self, Guarded};

/// A C library function, found after the shim (`RTLD_NEXT`) at its first call.
struct Next {
    name: &'static CStr,
    found: AtomicPtr<c_void>,
}

impl Next {
    const fn new(name: &'static CStr) -> Next {
        Next { name, found: AtomicPtr::new(core::ptr::null_mut()) }
    }

    /// The function's address, or null if no library after the shim defines it.
    fn get(&self) -> *mut c_void {
        let found = self.found.load(Ordering::Relaxed);
        if !found.is_null() {
            return found;
        }
        // SAFETY: a NUL-terminated name; RTLD_NEXT from the shim finds the C library's.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.found.store(found, Ordering::Relaxed);
        found
    }
}

/// What a call's bytes are checked for: `Write` for a call that writes the program's memory
/// (a `read`), `Read` for one that reads it (a `write`).
fn check(mode: Mode, spans: impl Iterator<Item = (u64, u64)>) {
    if table::IN_FLIGHT.load(Ordering::Relaxed) == 0 {
        return;
    }
    // The call must see the errno the program would; the checks may set it.
    // SAFETY: this thread's errno.
    let errno = unsafe { *libc::__errno_location() };
    for (lo, len) in spans.filter(|&(_, len)| len > 0) {
        check_span(mode, lo, lo.saturating_add(len));
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Checks `[lo, hi)` against the published ranges, records what it finds for the watcher
/// and unprotects the pages the call would be refused. No allocation, no lock: a signal
/// handler may call `write`.
fn check_span(mode: Mode, lo: u64, hi: u64) {
    let (plo, phi) = table::span(lo, hi);
    table::read(|t| {
        for r in t.ranges.iter().filter(|r| refuses(r, mode)) {
            let (rlo, rhi) = table::span(r.lo, r.hi);
            let (ulo, uhi) = (plo.max(rlo), phi.min(rhi));
            if ulo >= uhi {
                continue;
            }
            let (alo, ahi) = (lo.max(r.lo), hi.min(r.hi));
            let verdict =
                if alo < ahi { Verdict::Race { work: r.work, mode } } else { Verdict::Outside { work: r.work } };
            let (addr, len) = if alo < ahi { (alo, ahi - alo) } else { (ulo.max(lo), 1) };
            fault::record(verdict, addr, len, None);
            // Their ordinary protection back, as after a fault there.
            table::unprotect(ulo, uhi);
        }
    });
}

/// Whether the pages of `range` refuse an access in `mode`: a destination's pages refuse
/// everything, a source's refuse writes.
fn refuses(range: &Guarded, mode: Mode) -> bool {
    mode == Mode::Write || range.work.mode != Mode::Read
}

/// The bytes of an `iovec` array.
///
/// # Safety
/// `iov` points to `count` iovecs (or `count` is not positive).
unsafe fn vector<'a>(iov: *const libc::iovec, count: c_int) -> impl Iterator<Item = (u64, u64)> + 'a {
    let iov: &[libc::iovec] =
        if iov.is_null() || count <= 0 { &[] } else { unsafe { core::slice::from_raw_parts(iov, count as usize) } };
    iov.iter().map(|v| (v.iov_base as u64, v.iov_len as u64))
}

/// The bytes of a message: its vector and its control data.
///
/// # Safety
/// `msg` is null or points to a message header whose vector is valid.
unsafe fn message<'a>(msg: *const libc::msghdr) -> impl Iterator<Item = (u64, u64)> + 'a {
    let msg = unsafe { msg.as_ref() };
    let (iov, count, control) = match msg {
        Some(m) => {
            (m.msg_iov as *const libc::iovec, m.msg_iovlen as c_int, (m.msg_control as u64, m.msg_controllen as u64))
        }
        None => (core::ptr::null(), 0, (0, 0)),
    };
    unsafe { vector(iov, count) }.chain(core::iter::once(control))
}

/// One span.
fn one(buf: *const c_void, len: usize) -> core::iter::Once<(u64, u64)> {
    core::iter::once((buf as u64, len as u64))
}

/// What a function returns when it fails: -1 for the system calls, 0 items for `fread` and
/// `fwrite`.
trait Failed {
    const FAILED: Self;
}

impl Failed for isize {
    const FAILED: isize = -1;
}

impl Failed for usize {
    const FAILED: usize = 0;
}

/// Defines each interposed function: its C signature, the mode its bytes are checked for
/// and the expression giving them; then a call of the C library's own.
macro_rules! calls {
    ($($name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty, $mode:ident, $bytes:expr;)*) => {$(
        /// Interposed: see the module's documentation.
        ///
        /// # Safety
        /// As the C library's function of the same name.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            static NEXT: Next = Next::new(
                // SAFETY: the name and a NUL.
                unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
            );
            // SAFETY: the caller's arguments, as the C library's function takes them.
            #[allow(unused_unsafe)]
            let bytes = unsafe { $bytes };
            check(Mode::$mode, bytes);
            let next = NEXT.get();
            if next.is_null() {
                // No library after the shim defines it (no program that links it runs here).
                // SAFETY: this thread's errno.
                unsafe { *libc::__errno_location() = libc::ENOSYS };
                return <$ret as Failed>::FAILED;
            }
            // SAFETY: the C library's function of this name has this signature.
            let next: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { core::mem::transmute(next) };
            unsafe { next($($arg),*) }
        }
    )*};
}

type Off = libc::off_t;
type Msg = *mut libc::msghdr;
type Addr = *mut libc::sockaddr;
type AddrLen = *mut libc::socklen_t;
type Iov = *const libc::iovec;
type File = *mut libc::FILE;

calls! {
    read(fd: c_int, buf: *mut c_void, n: usize) -> isize, Write, one(buf, n);
    __read_chk(fd: c_int, buf: *mut c_void, n: usize, size: usize) -> isize, Write, one(buf, n.min(size));
    pread(fd: c_int, buf: *mut c_void, n: usize, at: Off) -> isize, Write, one(buf, n);
    pread64(fd: c_int, buf: *mut c_void, n: usize, at: Off) -> isize, Write, one(buf, n);
    __pread_chk(fd: c_int, buf: *mut c_void, n: usize, at: Off, size: usize) -> isize, Write, one(buf, n.min(size));
    __pread64_chk(fd: c_int, buf: *mut c_void, n: usize, at: Off, size: usize) -> isize, Write, one(buf, n.min(size));
    readv(fd: c_int, iov: Iov, count: c_int) -> isize, Write, vector(iov, count);
    preadv(fd: c_int, iov: Iov, count: c_int, at: Off) -> isize, Write, vector(iov, count);
    preadv64(fd: c_int, iov: Iov, count: c_int, at: Off) -> isize, Write, vector(iov, count);
    preadv2(fd: c_int, iov: Iov, count: c_int, at: Off, flags: c_int) -> isize, Write, vector(iov, count);
    recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize, Write, one(buf, n);
    __recv_chk(fd: c_int, buf: *mut c_void, n: usize, size: usize, flags: c_int) -> isize, Write, one(buf, n.min(size));
    recvfrom(fd: c_int, buf: *mut c_void, n: usize, flags: c_int, from: Addr, from_len: AddrLen) -> isize, Write,
        one(buf, n);
    __recvfrom_chk(fd: c_int, buf: *mut c_void, n: usize, size: usize, flags: c_int, from: Addr, from_len: AddrLen)
        -> isize, Write, one(buf, n.min(size));
    recvmsg(fd: c_int, msg: Msg, flags: c_int) -> isize, Write, message(msg);
    fread(buf: *mut c_void, size: usize, n: usize, file: File) -> usize, Write, one(buf, size.saturating_mul(n));
    fread_unlocked(buf: *mut c_void, size: usize, n: usize, file: File) -> usize, Write,
        one(buf, size.saturating_mul(n));
    __fread_chk(buf: *mut c_void, room: usize, size: usize, n: usize, file: File) -> usize, Write,
        one(buf, size.saturating_mul(n).min(room));
    __fread_unlocked_chk(buf: *mut c_void, room: usize, size: usize, n: usize, file: File) -> usize, Write,
        one(buf, size.saturating_mul(n).min(room));
    write(fd: c_int, buf: *const c_void, n: usize) -> isize, Read, one(buf, n);
    pwrite(fd: c_int, buf: *const c_void, n: usize, at: Off) -> isize, Read, one(buf, n);
    pwrite64(fd: c_int, buf: *const c_void, n: usize, at: Off) -> isize, Read, one(buf, n);
    writev(fd: c_int, iov: Iov, count: c_int) -> isize, Read, vector(iov, count);
    pwritev(fd: c_int, iov: Iov, count: c_int, at: Off) -> isize, Read, vector(iov, count);
    pwritev64(fd: c_int, iov: Iov, count: c_int, at: Off) -> isize, Read, vector(iov, count);
    pwritev2(fd: c_int, iov: Iov, count: c_int, at: Off, flags: c_int) -> isize, Read, vector(iov, count);
    send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize, Read, one(buf, n);
    sendto(fd: c_int, buf: *const c_void, n: usize, flags: c_int, to: *const libc::sockaddr, to_len: libc::socklen_t)
        -> isize, Read, one(buf, n);
    sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> isize, Read, message(msg);
    fwrite(buf: *const c_void, size: usize, n: usize, file: File) -> usize, Read, one(buf, size.saturating_mul(n));
    fwrite_unlocked(buf: *const c_void, size: usize, n: usize, file: File) -> usize, Read,
        one(buf, size.saturating_mul(n));
}
