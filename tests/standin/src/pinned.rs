//! Pinned host memory, and the asynchronous copies to and from it that are still in flight.
//!
//! As the real driver's: page-backed shared memory, small allocations packed 512 bytes apart
//! so that several share a page. The arena is mapped twice: the program's view, whose pages a
//! tool may protect, and the stand-in's own ([`device_view`]), standing for the device's DMA,
//! which page protection does not stop. A copy with a side in pinned memory completes at the
//! program's next call that waits ([`defer`], [`complete`]), so a program that reads its
//! destination before it synchronizes sees the bytes from before, as on a GPU.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Bytes of address space for pinned memory (a sparse file: pages appear on first touch).
const ARENA_BYTES: usize = 1 << 30;
/// Allocation granularity, as the driver's.
const ALIGN: u64 = 512;

struct Arena {
    base: u64,
    /// The same pages, as the device sees them.
    device: u64,
    next: u64,
    /// Freed blocks by rounded size, handed out again first.
    free: HashMap<u64, Vec<u64>>,
}

fn arena() -> &'static Mutex<Arena> {
    static ARENA: OnceLock<Mutex<Arena>> = OnceLock::new();
    ARENA.get_or_init(|| {
        // SAFETY: a new memory file, sized, mapped twice, shared.
        unsafe {
            let fd = libc::memfd_create(c"standin-pinned".as_ptr(), libc::MFD_CLOEXEC);
            assert!(
                fd >= 0 && libc::ftruncate(fd, ARENA_BYTES as libc::off_t) == 0,
                "stand-in: cannot make pinned memory"
            );
            let map = || {
                let p = libc::mmap(
                    core::ptr::null_mut(),
                    ARENA_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_NORESERVE,
                    fd,
                    0,
                );
                assert!(p != libc::MAP_FAILED, "stand-in: cannot map pinned memory");
                p as u64
            };
            let (base, device) = (map(), map());
            libc::close(fd);
            Mutex::new(Arena { base, device, next: base, free: HashMap::new() })
        }
    })
}

fn rounded(size: u64) -> u64 {
    size.max(1).div_ceil(ALIGN) * ALIGN
}

/// `size` bytes of pinned memory (zeroed when new).
pub fn alloc(size: u64) -> Option<u64> {
    let mut arena = arena().lock().unwrap_or_else(|e| e.into_inner());
    let size = rounded(size);
    if let Some(addr) = arena.free.get_mut(&size).and_then(Vec::pop) {
        return Some(addr);
    }
    if arena.next + size > arena.base + ARENA_BYTES as u64 {
        return None;
    }
    let addr = arena.next;
    arena.next += size;
    Some(addr)
}

/// Gives back the block at `addr` of `size` bytes.
pub fn release(addr: u64, size: u64) {
    arena().lock().unwrap_or_else(|e| e.into_inner()).free.entry(rounded(size)).or_default().push(addr);
}

/// Whether `addr` is pinned memory of the stand-in.
pub fn contains(addr: u64) -> bool {
    let arena = arena().lock().unwrap_or_else(|e| e.into_inner());
    (arena.base..arena.base + ARENA_BYTES as u64).contains(&addr)
}

/// The address through which the device reaches `addr`: the device's view of pinned
/// memory, any other address as it is.
pub fn device_view(addr: u64) -> u64 {
    let arena = arena().lock().unwrap_or_else(|e| e.into_inner());
    if (arena.base..arena.base + ARENA_BYTES as u64).contains(&addr) {
        addr - arena.base + arena.device
    } else {
        addr
    }
}

/// Copies still in flight: (destination, source, bytes).
static PENDING: Mutex<Vec<(u64, u64, usize)>> = Mutex::new(Vec::new());

/// An asynchronous copy that completes at the program's next wait.
pub fn defer(dst: u64, src: u64, len: usize) {
    PENDING.lock().unwrap_or_else(|e| e.into_inner()).push((dst, src, len));
}

/// Completes every copy in flight, in issue order.
pub fn complete() {
    let pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    for (dst, src, len) in pending {
        // SAFETY: both sides were checked when the copy was issued; pinned memory is reached
        // through the device's view.
        unsafe { core::ptr::copy(device_view(src) as *const u8, device_view(dst) as *mut u8, len) };
    }
}
