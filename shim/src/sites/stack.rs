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
use std::hash::BuildHasherDefault;
use std::sync::{Mutex, OnceLock, RwLock};

use streamsan::hash::{fast_map, FastHasher, FastMap};
use streamsan::recent::Recent;

use streamsan::model::op::StackId;
use streamsan::options::MAX_BACKTRACE_DEPTH;
use streamsan::phases::{self, Phase, Tally};
use streamsan::report::Frame;

use super::{objects, python};
use crate::intercept::options::options;

/// Marks a depot entry that is a Python frame id, not a return address (no user-space
/// address has these bits).
const PYTHON_FRAME: u64 = 0xffff_0000_0000_0000;

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
/// Unwinding costs a few hundred nanoseconds a frame, and a program calls the driver from
/// the same places again and again (a training step from a few hundred to a few thousand
/// distinct native chains); so a thread remembers every native chain it unwound
/// ([`ChainTrie`]) and reads the return addresses of one from the stack instead of unwinding
/// again, and remembers which stack a native chain and a Python chain made
/// ([`PYTHON_STACKS`]). With Python frames, the native chain ends at the interpreter's first
/// frame, where a report puts the Python frames ([`python::interpreter_range`]).
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
        return native;
    }
    let key = (native, python, n);
    if let Ok(Some(id)) = PYTHON_STACKS.try_with(|stacks| stacks.try_borrow().ok()?.get(&key, 0).copied()) {
        return id;
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
    /// launches from a few hundred lines over and over.
    static PYTHON_STACKS: RefCell<Recent<MixedChain, StackId, 2048>> = RefCell::new(Recent::default());
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
/// to read.
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

/// Return-address slots a thread's [`ChainTrie`] holds before it starts over (a few
/// megabytes): several thousand chains of forty frames, however they share their frames.
const TRIE_SLOTS: usize = 1 << 17;

/// The native chains a thread unwound, as a trie of the return addresses on its stack: a
/// root per anchor (the capture's frame address), then at each node the slots that every
/// chain through it shares, and where chains part, the node to go on with by the return
/// address found there, down to a chain's end and its id.
///
/// A lookup reads each return-address slot of the chain once, whatever the number of chains
/// remembered: chains from different places part at the first slot where they differ. Given
/// the frame at a slot and the return address into its caller, the caller's frame (and so the
/// next slot) is where the unwinder found it before; a chain that breaks this (a caller that
/// sizes its frame at run time) is not remembered where it would contradict a remembered one.
/// A lookup neither allocates nor locks.
///
/// Between two captures the program's own work evicts the trie from the caches, so a
/// lookup's cost is its cache misses: the nodes' runs of slots share one array, in the order
/// they were made (a chain's nodes are made together), not a heap block each.
#[derive(Default)]
struct ChainTrie {
    roots: HashMap<usize, u32, BuildHasherDefault<FastHasher>>,
    nodes: Vec<ChainNode>,
    /// Every node's run, a range each: (address, return address there).
    slots: Vec<(usize, u64)>,
}

/// A node of a [`ChainTrie`].
struct ChainNode {
    /// The (address, return address there) that every chain through the node has, in turn:
    /// `slots[run.0..run.0 + run.1]`.
    run: (u32, u32),
    /// The slot after the run where the chains through the node part; 0 where they end.
    fork: usize,
    /// Where they end, the interned program frames.
    id: StackId,
    /// (return address at `fork`, next node): the first inline, since most forks are two-way;
    /// the others by return address, for a binary search (a fork where every kernel's launch
    /// stub calls the same launch function has hundreds).
    first: (u64, u32),
    more: Vec<(u64, u32)>,
}

impl ChainNode {
    fn next(&self, value: u64) -> Option<u32> {
        if self.first.0 == value && self.first.1 != u32::MAX {
            return Some(self.first.1);
        }
        self.more.binary_search_by_key(&value, |&(v, _)| v).ok().map(|i| self.more[i].1)
    }

    fn link(&mut self, value: u64, node: u32) {
        if self.first.1 == u32::MAX {
            self.first = (value, node);
        } else {
            let at = self.more.partition_point(|&(v, _)| v < value);
            self.more.insert(at, (value, node));
        }
    }
}

/// The word at a return-address slot.
///
/// # Safety
/// The slot held a return address of a chain that matched the stack up to it, above the
/// capture's frame, which is at the same address: this thread's live stack.
#[inline]
unsafe fn read_slot(slot: usize) -> u64 {
    unsafe { core::ptr::read_volatile(slot as *const u64) }
}

impl ChainTrie {
    /// The id of the chain on the stack above the capture's frame at `anchor`, if remembered.
    #[inline]
    fn find(&self, anchor: usize) -> Option<StackId> {
        let mut node = &self.nodes[*self.roots.get(&anchor)? as usize];
        loop {
            // SAFETY (both reads): slots of a chain that matched the stack so far (read_slot).
            if !self.run(node).iter().all(|&(slot, value)| unsafe { read_slot(slot) } == value) {
                return None;
            }
            if node.fork == 0 {
                return Some(node.id);
            }
            node = &self.nodes[node.next(unsafe { read_slot(node.fork) })? as usize];
        }
    }

    fn run(&self, node: &ChainNode) -> &[(usize, u64)] {
        let (start, len) = (node.run.0 as usize, node.run.1 as usize);
        &self.slots[start..start + len]
    }

    /// Remembers the chain of return `slots` above the capture's frame at `anchor`.
    fn remember(&mut self, anchor: usize, slots: &[(usize, u64)], id: StackId) {
        if self.slots.len() + slots.len() > TRIE_SLOTS {
            *self = ChainTrie::default();
        }
        let Some(&root) = self.roots.get(&anchor) else {
            let root = self.end(slots, id);
            self.roots.insert(anchor, root);
            return;
        };
        let (mut node, mut rest) = (root as usize, slots);
        loop {
            let run = self.run(&self.nodes[node]);
            let shared = run.iter().zip(rest).take_while(|(a, b)| a == b).count();
            if shared < run.len() {
                // The chains part inside the run: at the same slot, else contradiction.
                let Some(&(slot, value)) = rest.get(shared) else { return };
                let (fork, old_value) = run[shared];
                if slot != fork {
                    return;
                }
                // The node keeps the shared part; the rest of its run, its fork and its
                // links go to a node after it.
                let old = &mut self.nodes[node];
                let (start, len) = old.run;
                let tail = ChainNode {
                    run: (start + shared as u32 + 1, len - shared as u32 - 1),
                    fork: old.fork,
                    id: old.id,
                    first: old.first,
                    more: core::mem::take(&mut old.more),
                };
                (old.run.1, old.fork, old.first) = (shared as u32, slot, (0, u32::MAX));
                let after = self.add(tail);
                let new = self.end(&rest[shared + 1..], id);
                self.nodes[node].link(old_value, after);
                self.nodes[node].link(value, new);
                return;
            }
            rest = &rest[shared..];
            let fork = self.nodes[node].fork;
            match rest.first() {
                None if fork == 0 => {
                    self.nodes[node].id = id;
                    return;
                }
                Some(&(slot, value)) if slot == fork => match self.nodes[node].next(value) {
                    Some(next) => (node, rest) = (next as usize, &rest[1..]),
                    None => {
                        let new = self.end(&rest[1..], id);
                        self.nodes[node].link(value, new);
                        return;
                    }
                },
                // Ends where another goes on, or goes on elsewhere: contradiction.
                _ => return,
            }
        }
    }

    /// A new node where a chain ends with `run`.
    fn end(&mut self, run: &[(usize, u64)], id: StackId) -> u32 {
        let start = self.slots.len() as u32;
        self.slots.extend_from_slice(run);
        self.add(ChainNode { run: (start, run.len() as u32), fork: 0, id, first: (0, u32::MAX), more: Vec::new() })
    }

    fn add(&mut self, node: ChainNode) -> u32 {
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }
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
    let (python_ids, native): (Vec<u64>, Vec<u64>) =
        entries.into_iter().partition(|e| e & PYTHON_FRAME == PYTHON_FRAME);
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
        address = format!("+{:#x}", ip - info.dli_fbase as u64);
        module = Some(objects::path(&info));
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

/// The program frames a capture keeps: `backtrace_depth`, within the buffers' size (the
/// host guard's caught stacks keep as many).
pub fn depth() -> usize {
    options().backtrace_depth.min(MAX_BACKTRACE_DEPTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in stack: chains are (index of a word, return address) pairs over it.
    struct Words(Vec<u64>);

    impl Words {
        fn slots(&self, chain: &[(usize, u64)]) -> Vec<(usize, u64)> {
            chain.iter().map(|&(i, v)| (&self.0[i] as *const u64 as usize, v)).collect()
        }

        fn hold(&mut self, chain: &[(usize, u64)]) {
            for &(i, v) in chain {
                self.0[i] = v;
            }
        }
    }

    #[test]
    fn a_trie_finds_each_chain_it_remembers_by_what_the_stack_holds() {
        let mut words = Words(vec![0; 16]);
        // 64 chains that part bit by bit, from the third slot to the eighth.
        let chains: Vec<Vec<(usize, u64)>> = (0..64u64)
            .map(|c| (0..10).map(|i| (i, if (2..8).contains(&i) { 100 + (c >> (7 - i)) } else { 7 })).collect())
            .collect();
        let mut trie = ChainTrie::default();
        for (c, chain) in chains.iter().enumerate() {
            words.hold(chain);
            assert_eq!(trie.find(1), None, "chain {c} before it is remembered");
            trie.remember(1, &words.slots(chain), StackId(c as u32));
        }
        for (c, chain) in chains.iter().enumerate().rev() {
            words.hold(chain);
            assert_eq!(trie.find(1), Some(StackId(c as u32)));
            assert_eq!(trie.find(2), None, "another anchor");
        }
        words.0[9] = 1;
        assert_eq!(trie.find(1), None, "a return address no chain has");
    }

    #[test]
    fn a_fork_of_hundreds_of_ways_finds_each() {
        let mut words = Words(vec![0; 4]);
        let mut trie = ChainTrie::default();
        let chain = |c: u64| [(0, 7), (1, 1000 + (c * 7919) % 4096), (2, 9)];
        for c in 0..300 {
            words.hold(&chain(c));
            trie.remember(1, &words.slots(&chain(c)), StackId(c as u32));
        }
        for c in (0..300).rev() {
            words.hold(&chain(c));
            assert_eq!(trie.find(1), Some(StackId(c as u32)));
        }
    }

    #[test]
    fn a_chain_that_contradicts_a_remembered_one_is_left_to_the_unwinder() {
        let mut words = Words(vec![0; 16]);
        let long = [(0, 1), (1, 2), (2, 3)];
        let shorter = [(0, 1), (1, 2)];
        let elsewhere = [(0, 1), (3, 2), (4, 5)];
        let mut trie = ChainTrie::default();
        words.hold(&long);
        trie.remember(1, &words.slots(&long), StackId(1));
        trie.remember(1, &words.slots(&shorter), StackId(2));
        words.hold(&elsewhere);
        trie.remember(1, &words.slots(&elsewhere), StackId(3));
        words.hold(&long);
        assert_eq!(trie.find(1), Some(StackId(1)));
    }
}
