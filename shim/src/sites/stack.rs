//! Call sites: captured unresolved on every intercepted call, resolved only for a report.
//!
//! A capture walks the stack, drops the shim's own frames, adds the Python frames of a
//! Python program ([`super::python`]), and interns the whole in a depot, so that an
//! operation carries a 4-byte [`StackId`]. Resolving an id to functions, files and lines
//! (slow: tens of microseconds a frame, tens of milliseconds the first time) happens when a
//! race is reported.

use core::ffi::c_void;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};

use streamsan::hash::{fast_map, FastMap};
use streamsan::recent::Recent;

use streamsan::model::op::StackId;
use streamsan::phases::{self, Phase};
use streamsan::report::Frame;

use super::python;

/// Native frames kept per call site.
const DEPTH: usize = 24;
/// Marks a depot entry that is a Python frame id, not a return address (no user-space
/// address has these bits).
const PYTHON_FRAME: u64 = 0xffff_0000_0000_0000;

/// The address range of the shim itself: frames in it are not the program's.
fn shim_range() -> (u64, u64) {
    static RANGE: OnceLock<(u64, u64)> = OnceLock::new();
    *RANGE.get_or_init(|| {
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: dladdr on a function of this library.
        if unsafe { libc::dladdr(shim_range as *const c_void, &mut info) } == 0 {
            return (0, 0);
        }
        let base = info.dli_fbase as u64;
        let mut found = (base, base);
        unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
            // SAFETY: called by dl_iterate_phdr with valid pointers.
            let (info, found) = unsafe { (&*info, &mut *(data as *mut (u64, u64))) };
            if info.dlpi_addr != found.0 {
                return 0;
            }
            for i in 0..info.dlpi_phnum as usize {
                let ph = unsafe { &*info.dlpi_phdr.add(i) };
                if ph.p_type == libc::PT_LOAD {
                    found.1 = found.1.max(info.dlpi_addr + ph.p_vaddr + ph.p_memsz);
                }
            }
            1
        }
        // SAFETY: the callback only reads the headers it is given.
        unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut c_void) };
        found
    })
}

struct Depot {
    ids: FastMap<Box<[u64]>, u32>,
    stacks: RwLock<Vec<Box<[u64]>>>,
}

fn depot() -> &'static Depot {
    static DEPOT: OnceLock<Depot> = OnceLock::new();
    DEPOT.get_or_init(|| Depot { ids: fast_map(), stacks: RwLock::new(vec![Box::new([])]) })
}

/// The program's stack at the call being intercepted.
///
/// Unwinding costs about a hundred nanoseconds a frame, and programs call the driver from
/// the same few places again and again; so a thread remembers the native chains it unwound
/// lately ([`RecentChain`]) and checks one against the stack instead of unwinding again, and
/// remembers which stack a native chain and a Python chain made ([`PYTHON_STACKS`]).
#[inline(never)]
pub fn capture() -> StackId {
    let marker = 0u8;
    // The same call chain puts this frame at the same address.
    let anchor = core::hint::black_box(&marker) as *const u8 as usize;
    let native = match RECENT.try_with(|recent| recent.borrow().find(anchor).map(|r| r.id)) {
        Ok(Some(id)) => id,
        _ => unwind(anchor),
    };
    let mut python = [(0usize, 0); python::DEPTH];
    let n = phases::time(Phase::PythonFrames, || python::walk(&mut python));
    if n == 0 {
        return native;
    }
    let key = (native, python, n);
    if let Ok(Some(id)) = PYTHON_STACKS.try_with(|stacks| stacks.try_borrow().ok()?.get(&key, 0).copied()) {
        return id;
    }
    let mut ids = [0u32; python::DEPTH];
    let resolved = python::intern_all(&python[..n], &mut ids);
    let mut entries = native_entries(native);
    entries.extend(ids[..n].iter().map(|&id| PYTHON_FRAME | id as u64));
    let id = intern(&entries);
    if resolved {
        let _ = PYTHON_STACKS.try_with(|stacks| {
            if let Ok(mut stacks) = stacks.try_borrow_mut() {
                stacks.put(key, 0, id);
            }
        });
    }
    id
}

/// A stack caught outside a driver call (the host's access of a host race, seen by the
/// fault handler): `native`, innermost first, and the Python frames found with it, named
/// now (their code objects are checked to be alive first).
pub fn intern_caught(native: &[u64], python: &[python::RawFrame]) -> StackId {
    let mut entries = native.to_vec();
    if !python.is_empty() {
        let mut ids = [0u32; python::DEPTH];
        python::intern_all(python, &mut ids);
        entries.extend(ids[..python.len()].iter().map(|&id| PYTHON_FRAME | id as u64));
    }
    intern(&entries)
}

/// A native chain's id, the Python frames found with it and how many of them there are.
type MixedChain = (StackId, [python::RawFrame; python::DEPTH], usize);

thread_local! {
    /// Stacks made of a native chain and Python frames, by the two as found: a training loop
    /// launches from the same few lines over and over.
    static PYTHON_STACKS: RefCell<Recent<MixedChain, StackId, 256>> = RefCell::new(Recent::default());
}

/// The entries of an interned native stack.
fn native_entries(id: StackId) -> Vec<u64> {
    depot().stacks.read().unwrap_or_else(|e| e.into_inner()).get(id.0 as usize).map(|s| s.to_vec()).unwrap_or_default()
}

/// Frames of a chain, the shim's included: enough for the shim's own and `DEPTH` more.
const CHAIN: usize = DEPTH + 16;

/// Unwinds the stack, interns its program frames (innermost first), and remembers the chain
/// for [`capture`]'s check.
fn unwind(anchor: usize) -> StackId {
    let (lo, hi) = shim_range();
    // (return address, stack pointer at the call) of every frame, the shim's included.
    let mut chain = [(0u64, 0u64); CHAIN];
    let mut native = [0u64; DEPTH];
    let mut len = 0;
    let mut kept = 0;
    // SAFETY: the unwinder is thread-safe; the closure only stores addresses.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as u64;
            if ip == 0 {
                return false;
            }
            chain[len] = (ip, frame.sp() as u64);
            len += 1;
            if kept > 0 || !(lo..hi).contains(&ip) {
                native[kept] = ip;
                kept += 1;
            }
            kept < DEPTH && len < CHAIN
        });
    }
    let id = intern(&native[..kept]);
    let _ = RECENT.try_with(|recent| recent.borrow_mut().remember(RecentChain::of_chain(anchor, &chain[..len], id)));
    id
}

/// A chain a thread unwound lately. Every frame above the capture is still on the stack at
/// the next capture from the same place: if the capture's frame is at the same address and
/// every return address of the chain still sits where the unwinder found it, the chain is
/// the same, and so are its program frames.
struct RecentChain {
    anchor: usize,
    /// (address, return address read there) for each call above the capture.
    slots: Vec<(usize, u64)>,
    /// The interned program frames.
    id: StackId,
}

impl RecentChain {
    /// None when the chain does not keep return addresses where x86-64 puts them: the
    /// unwinder gives each frame's stack pointer at its call, and the call pushed the return
    /// address into that frame just below it. Such a chain is unwound every time.
    fn of_chain(anchor: usize, chain: &[(u64, u64)], id: StackId) -> Option<RecentChain> {
        let mut slots = Vec::with_capacity(chain.len());
        for &(ip, sp) in chain {
            if sp as usize <= anchor {
                continue; // returns into the unwinder's own frames, gone once it returned
            }
            let slot = sp as usize - 8;
            // SAFETY: the return-address word of a frame that encloses this one, on this
            // thread's stack.
            if unsafe { core::ptr::read_volatile(slot as *const u64) } != ip {
                return None;
            }
            slots.push((slot, ip));
        }
        Some(RecentChain { anchor, slots, id })
    }

    fn matches(&self, anchor: usize) -> bool {
        // SAFETY: each slot is in a frame that encloses the capture's frame, which is at the
        // same address as when the slot was recorded: live stack of this thread.
        self.anchor == anchor && self.slots.iter().all(|&(slot, ip)| unsafe { core::ptr::read_volatile(slot as *const u64) } == ip)
    }
}

/// The last few chains of one thread, replaced in turn.
#[derive(Default)]
struct RecentChains {
    chains: [Option<RecentChain>; 8],
    next: usize,
}

impl RecentChains {
    fn find(&self, anchor: usize) -> Option<&RecentChain> {
        self.chains.iter().flatten().find(|r| r.matches(anchor))
    }

    fn remember(&mut self, recent: Option<RecentChain>) {
        if let Some(recent) = recent {
            let i = self.next;
            self.chains[i] = Some(recent);
            self.next = (i + 1) % self.chains.len();
        }
    }
}

thread_local! {
    static RECENT: RefCell<RecentChains> = RefCell::new(RecentChains::default());
}

fn intern(ips: &[u64]) -> StackId {
    let depot = depot();
    if let Some(id) = depot.ids.get(ips) {
        return StackId(*id);
    }
    let id = *depot
        .ids
        .entry(ips.into())
        .or_insert_with(|| {
            let mut stacks = depot.stacks.write().unwrap_or_else(|e| e.into_inner());
            stacks.push(ips.into());
            (stacks.len() - 1) as u32
        })
        .value();
    StackId(id)
}

/// The frames of a call site, resolved (each address once per process). In a Python
/// program the interpreter's native frames give way to the Python frames.
pub fn frames(id: StackId) -> Vec<Frame> {
    let entries: Vec<u64> = {
        let stacks = depot().stacks.read().unwrap_or_else(|e| e.into_inner());
        stacks.get(id.0 as usize).map(|s| s.to_vec()).unwrap_or_default()
    };
    let (python_ids, native): (Vec<u64>, Vec<u64>) = entries.into_iter().partition(|e| e & PYTHON_FRAME == PYTHON_FRAME);
    let mut frames: Vec<Frame> = native.into_iter().flat_map(resolve).collect();
    if !python_ids.is_empty() {
        if let Some(cut) = frames.iter().position(python::is_interpreter) {
            frames.truncate(cut);
        }
        frames.extend(python_ids.into_iter().map(|e| python::frame((e & !PYTHON_FRAME) as u32)));
    }
    frames
}

/// The frames at a return address: one per function inlined there, innermost first.
fn resolve(ip: u64) -> Vec<Frame> {
    static CACHE: Mutex<Option<HashMap<u64, Vec<Frame>>>> = Mutex::new(None);
    if let Some(frames) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&ip) {
        return frames.clone();
    }
    let (mut address, mut module) = (format!("{ip:#x}"), None);
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables.
    if unsafe { libc::dladdr(ip as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null() {
        let name = unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
        address = format!("+{:#x}", ip - info.dli_fbase as u64);
        module = Some(if name.is_empty() { std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default() } else { name });
    }
    let mut frames = Vec::new();
    // A return address points after the call; `backtrace::resolve` itself looks up the byte
    // before the address it is given, so it finds the call: the address goes as it is.
    backtrace::resolve(ip as *mut c_void, |symbol| {
        frames.push(Frame {
            address: address.clone(),
            function: symbol.name().map(|n| format!("{n:#}")),
            file: symbol.filename().map(|f| f.display().to_string()),
            line: symbol.lineno(),
            module: module.clone(),
        });
    });
    if frames.is_empty() {
        frames.push(Frame { address, module, ..Frame::default() });
    }
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(ip, frames.clone());
    frames
}

/// Every frame of the calling thread, the shim's included, resolved (for a crash report).
pub fn current_frames() -> Vec<Frame> {
    let mut ips = Vec::with_capacity(64);
    backtrace::trace(|frame| {
        ips.push(frame.ip() as u64);
        ips.len() < 64
    });
    ips.into_iter().filter(|&ip| ip != 0).flat_map(resolve).collect()
}
