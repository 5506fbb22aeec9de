//! Call sites: captured unresolved on every intercepted call, resolved only for a report.
//!
//! A capture walks the stack, drops the shim's own frames, adds the Python frames of a
//! Python program ([`crate::python`]), and interns the whole in a depot, so that an
//! operation carries a 4-byte [`StackId`]. Resolving an id to functions, files and lines
//! (slow: tens of microseconds a frame, tens of milliseconds the first time) happens when a
//! race is reported.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};

use dashmap::DashMap;

use streamsan::model::op::StackId;
use streamsan::report::Frame;

use crate::python;

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
    ids: DashMap<Box<[u64]>, u32>,
    stacks: RwLock<Vec<Box<[u64]>>>,
}

fn depot() -> &'static Depot {
    static DEPOT: OnceLock<Depot> = OnceLock::new();
    DEPOT.get_or_init(|| Depot { ids: DashMap::new(), stacks: RwLock::new(vec![Box::new([])]) })
}

/// The program's stack at the call being intercepted.
pub fn capture() -> StackId {
    let (lo, hi) = shim_range();
    let mut ips = [0u64; DEPTH + python::DEPTH];
    let mut n = 0;
    let mut in_shim = true;
    // SAFETY: the unwinder is thread-safe; the closure only stores addresses.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as u64;
            if in_shim && (lo..hi).contains(&ip) {
                return true;
            }
            in_shim = false;
            if ip == 0 {
                return false;
            }
            ips[n] = ip;
            n += 1;
            n < DEPTH
        });
    }
    let mut py = [0u32; python::DEPTH];
    let python_frames = python::capture(&mut py);
    for &id in &py[..python_frames] {
        ips[n] = PYTHON_FRAME | id as u64;
        n += 1;
    }
    intern(&ips[..n])
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
    // A return address points after the call: look up the call itself.
    backtrace::resolve(ip.saturating_sub(1) as *mut c_void, |symbol| {
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
