//! Call sites: captured unresolved on every intercepted call and interned in a depot, so
//! that an operation carries a 4-byte [`StackId`]; resolved to functions, files and lines
//! only when a race is reported.

use core::ffi::c_void;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Mutex, OnceLock, RwLock};

use streamsan::hash::{fast_map, FastHasher, FastMap};
use streamsan::thread_cache::ThreadCache;

use streamsan::model::op::StackId;
use streamsan::options::MAX_BACKTRACE_DEPTH;
use streamsan::phases::{self, Phase, Tally};
use streamsan::report::frames::PYTHON_MODULE;
use streamsan::report::Frame;

use super::chain_cache::ChainTrie;
use super::{objects, python, test};
use crate::intercept::options::options;

/// Marks a depot entry that is a Python frame id, not a return address (no user-space
/// address has these bits).
const PYTHON_FRAME: u64 = 0xffff_0000_0000_0000;
/// Marks a depot entry that is the number of the test running ([`test`]), the last entry of
/// a call site made in a test.
const TEST: u64 = 0xfffe_0000_0000_0000;
/// Marks a depot entry that stands for another process's call site, by its number in
/// [`PEER_SITES`] ([`peer_site`]).
const PEER: u64 = 0xfffd_0000_0000_0000;
/// The bits that tell a marked entry apart.
const MARK: u64 = 0xffff_0000_0000_0000;

/// Other processes' call sites, as they published them ([`portable`]).
static PEER_SITES: RwLock<Vec<Vec<Frame>>> = RwLock::new(Vec::new());

/// The address range of the shim itself: frames in it are not the program's.
pub fn shim_range() -> (u64, u64) {
    static RANGE: OnceLock<(u64, u64)> = OnceLock::new();
    *RANGE.get_or_init(|| objects::holding(shim_range as *const () as usize).map_or((0, 0), |(range, _)| range))
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
/// Unwinding is slow, frame by frame, and a program calls the driver from the same places
/// again and again (a training step from a few hundred to a few thousand distinct native
/// chains); so a thread remembers every native chain it unwound ([`ChainTrie`]) and reads the
/// return addresses of one from the stack instead of unwinding again, and remembers which
/// stack a native chain and a Python chain made ([`PYTHON_STACKS`]). With Python frames, the
/// native chain ends at the interpreter's first frame, where a report puts the Python frames
/// ([`python::interpreter_range`]). A call made while a test runs has the test's number last.
#[inline(never)]
pub fn capture() -> StackId {
    let marker = 0u8;
    // The same call chain puts this frame at the same address.
    let anchor = core::hint::black_box(&marker) as *const u8 as usize;
    let mut python = [(0usize, 0); python::DEPTH];
    let n = phases::time(Phase::PythonFrames, || python::walk(&mut python));
    let ends = if n == 0 { ChainEnd::Depth } else { ChainEnd::Interpreter };
    let native = match CHAINS.try_with(|chains| chains.try_borrow().ok()?[ends as usize].find(anchor)) {
        Ok(Some(id)) => id,
        _ => phases::time(Phase::Unwind, || unwind(anchor, ends)),
    };
    if n == 0 {
        return in_test(native);
    }
    let key = mixed_chain(native, &python[..n]);
    if let Ok(Some(id)) = PYTHON_STACKS.try_with(|stacks| stacks.try_borrow().ok()?.get(&key, 0).copied()) {
        return in_test(id);
    }
    let _timer = phases::start(Phase::MixedStack);
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
    in_test(id)
}

/// `site` as made in the test running, if any.
#[inline]
fn in_test(site: StackId) -> StackId {
    let number = test::current();
    if number == 0 {
        return site;
    }
    let key = (site.0, number);
    if let Ok(Some(id)) = TEST_SITES.try_with(|sites| sites.try_borrow().ok()?.get(&key, 0).copied()) {
        return id;
    }
    let mut entries = native_entries(site);
    entries.push(TEST | number as u64);
    let id = intern(&entries);
    let _ = TEST_SITES.try_with(|sites| {
        if let Ok(mut sites) = sites.try_borrow_mut() {
            sites.put(key, 0, id);
        }
    });
    id
}

/// The test running when the call at `site` was made.
pub fn test_of(site: StackId) -> Option<String> {
    let stacks = depot().stacks.read().unwrap_or_else(|e| e.into_inner());
    let last = *stacks.get(site.0 as usize)?.last()?;
    drop(stacks);
    (last & MARK == TEST).then(|| test::name((last & !MARK) as u32)).flatten()
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
    in_test(intern(&entries))
}

/// A stack of a native chain and Python frames, as a thread remembers it: the chain's id,
/// the innermost Python frame and a hash of the others. Small, so that a lookup reads one
/// cache line or two, where the frames themselves (two hundred bytes a key) took five; two
/// stacks alike in the first two and apart in the rest would have to hash alike as well.
type MixedChain = (u32, python::RawFrame, u64);

/// `python`: one frame at least.
fn mixed_chain(native: StackId, python: &[python::RawFrame]) -> MixedChain {
    let mut outer = FastHasher::default();
    for &(code, offset) in &python[1..] {
        outer.write_u64(code as u64);
        outer.write_u64(offset as u64);
    }
    (native.0, python[0], outer.finish())
}

thread_local! {
    /// Stacks made of a native chain and Python frames, by the two as found: a training loop
    /// launches from a few hundred lines over and over.
    static PYTHON_STACKS: RefCell<ThreadCache<MixedChain, StackId, 2048>> = RefCell::new(ThreadCache::default());
    /// Call sites as made in a test, by the site and the test's number.
    static TEST_SITES: RefCell<ThreadCache<(u32, u32), StackId, 256>> = RefCell::new(ThreadCache::default());
}

/// The entries of an interned native stack.
fn native_entries(id: StackId) -> Vec<u64> {
    depot().stacks.read().unwrap_or_else(|e| e.into_inner()).get(id.0 as usize).map(|s| s.to_vec()).unwrap_or_default()
}

/// Frames of a chain, the shim's included: enough for the shim's own and the deepest
/// capture's.
const CHAIN: usize = MAX_BACKTRACE_DEPTH + 16;

/// Where a native chain ends: at `backtrace_depth` program frames, or also at the
/// interpreter's first frame when Python frames stand in for the interpreter's (a thread
/// keeps the two kinds apart, one [`ChainTrie`] each: a thread whose Python frames cannot be
/// read keeps its whole native chain).
#[derive(Clone, Copy)]
enum ChainEnd {
    Depth = 0,
    Interpreter = 1,
}

/// Unwinds the stack, interns its program frames (innermost first, as many as
/// `backtrace_depth` asks, up to where `ends` says), and remembers the chain for
/// [`capture`]'s check. A shorter chain is faster for the next capture from the same place
/// to read. Not inlined: its buffers would widen every capture's frame.
#[inline(never)]
fn unwind(anchor: usize, ends: ChainEnd) -> StackId {
    let (lo, hi) = shim_range();
    let interpreter = match ends {
        ChainEnd::Interpreter => python::interpreter_range().unwrap_or((0, 0)),
        ChainEnd::Depth => (0, 0),
    };
    let keep = depth();
    // (return address, stack pointer at the call) of every frame, the shim's included.
    let mut chain = [(0u64, 0u64); CHAIN];
    let mut native = [0u64; MAX_BACKTRACE_DEPTH];
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
            kept < keep && len < CHAIN && !(interpreter.0..interpreter.1).contains(&ip)
        });
    }
    phases::tally(Tally::ChainFrames, len);
    let id = intern(&native[..kept]);
    if let Some(slots) = return_slots(anchor, &chain[..len]) {
        let _ = CHAINS.try_with(|chains| {
            if let Ok(mut chains) = chains.try_borrow_mut() {
                chains[ends as usize].remember(anchor, &slots, id);
            }
        });
    }
    id
}

/// The (address, return address read there) of each call of `chain` above the capture's
/// frame at `anchor`, innermost first. Every frame above the capture is still on the stack at
/// the next capture from the same place: if the capture's frame is at the same address and
/// every return address of the chain still sits where the unwinder found it, the chain is
/// the same, and so are its program frames.
///
/// None when the chain does not keep return addresses where x86-64 puts them: the unwinder
/// gives each frame's stack pointer at its call, and the call pushed the return address into
/// that frame just below it. Such a chain is unwound every time.
fn return_slots(anchor: usize, chain: &[(u64, u64)]) -> Option<Vec<(usize, u64)>> {
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
    Some(slots)
}

thread_local! {
    /// The chains a thread unwound, by how they end ([`ChainEnd`]).
    static CHAINS: RefCell<[ChainTrie; 2]> = RefCell::new(Default::default());
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
    if let Some(&peer) = entries.first().filter(|&&e| e & MARK == PEER) {
        return peer_frames((peer & !MARK) as usize);
    }
    let (python_ids, native): (Vec<u64>, Vec<u64>) =
        entries.into_iter().filter(|e| e & MARK != TEST).partition(|e| e & MARK == PYTHON_FRAME);
    let mut frames: Vec<Frame> = native.into_iter().flat_map(resolve).collect();
    if !python_ids.is_empty() {
        if let Some(cut) = frames.iter().position(python::is_interpreter) {
            frames.truncate(cut);
        }
        frames.extend(python_ids.into_iter().map(|e| python::frame((e & !PYTHON_FRAME) as u32)));
    }
    frames
}

/// A call site as another process sharing memory with this one can read it: native frames
/// as their module and offset, unresolved (symbols cost this process time it may never need
/// to spend; the reader resolves them in its own copy of the module), Python frames named.
pub fn portable(id: StackId) -> Vec<Frame> {
    let entries: Vec<u64> = {
        let stacks = depot().stacks.read().unwrap_or_else(|e| e.into_inner());
        stacks.get(id.0 as usize).map(|s| s.to_vec()).unwrap_or_default()
    };
    let frame = |entry: u64| match entry & MARK {
        PYTHON_FRAME => Some(python::frame((entry & !MARK) as u32)),
        TEST | PEER => None,
        _ => {
            let (address, module) = place(entry);
            Some(Frame { address, module, ..Frame::default() })
        }
    };
    entries.into_iter().filter_map(frame).collect()
}

/// Another process's call site ([`portable`]) as a site of this process.
pub fn peer_site(frames: Vec<Frame>) -> StackId {
    let mut sites = PEER_SITES.write().unwrap_or_else(|e| e.into_inner());
    sites.push(frames);
    let number = (sites.len() - 1) as u64;
    drop(sites);
    intern(&[PEER | number])
}

/// The frames of another process's call site: each native frame resolved where this process
/// loaded its module too, and, as for a site of this process, the interpreter's given way to
/// the Python frames.
fn peer_frames(number: usize) -> Vec<Frame> {
    let published = PEER_SITES.read().unwrap_or_else(|e| e.into_inner()).get(number).cloned().unwrap_or_default();
    let (python, native): (Vec<Frame>, Vec<Frame>) =
        published.into_iter().partition(|f| f.module.as_deref() == Some(PYTHON_MODULE));
    let mut frames: Vec<Frame> = native
        .into_iter()
        .flat_map(|frame| {
            let offset = frame.address.strip_prefix("+0x").and_then(|hex| u64::from_str_radix(hex, 16).ok());
            match (offset, frame.module.as_deref().and_then(objects::base_of)) {
                (Some(offset), Some(base)) => resolve(base + offset),
                _ => vec![frame],
            }
        })
        .collect();
    if !python.is_empty() {
        if let Some(cut) = frames.iter().position(python::is_interpreter) {
            frames.truncate(cut);
        }
        frames.extend(python);
    }
    frames
}

/// Where a return address lies: `+offset` in its module and the module's path, or the
/// address itself when no module holds it.
fn place(ip: u64) -> (String, Option<String>) {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables.
    if unsafe { libc::dladdr(ip as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null() {
        return (format!("+{:#x}", ip - info.dli_fbase as u64), Some(objects::path(&info)));
    }
    (format!("{ip:#x}"), None)
}

/// The frames at a return address: one per function inlined there, innermost first.
fn resolve(ip: u64) -> Vec<Frame> {
    static CACHE: Mutex<Option<HashMap<u64, Vec<Frame>>>> = Mutex::new(None);
    if let Some(frames) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&ip) {
        return frames.clone();
    }
    let (address, module) = place(ip);
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

/// The program frames a capture keeps: `backtrace_depth`, within the buffers' size (the
/// host guard's caught stacks keep as many).
pub fn depth() -> usize {
    options().backtrace_depth.min(MAX_BACKTRACE_DEPTH)
}
