//! Known allocations, found by address.
//!
//! A buffer is registered in every 2 MiB granule its bytes touch, so finding the buffer of
//! an address is one hash lookup and a short scan. Freed buffers stay findable, marked
//! freed, in a bounded quarantine, so that a later access to their bytes is reported as a
//! use-after-free until the address is allocated again or the quarantine forgets it.
//! An address resolves to the innermost live buffer containing it (sub-allocations
//! declared inside a larger buffer), else to the most recently freed one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;

use super::op::OpRecord;
use super::shadow::Shadow;

const GRANULE_SHIFT: u32 = 21;
/// Freed buffers remembered for use-after-free.
const QUARANTINE: usize = 1 << 16;

/// What kind of memory a buffer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// `cuMemAlloc`, `cuMemAllocPitch`.
    Device,
    /// `cuMemAllocAsync`, `cuMemAllocFromPoolAsync`.
    StreamOrdered,
    Managed,
    /// `cuMemAllocHost`, `cuMemHostAlloc`.
    PinnedHost,
    /// `cuMemHostRegister`.
    RegisteredHost,
    /// `cuMemCreate` + `cuMemMap`.
    Mapped,
    /// Allocated by a memory node of a graph.
    GraphOwned,
    /// Declared through streamsan's annotation API.
    Annotated,
}

impl MemoryKind {
    pub fn label(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::StreamOrdered => "stream-ordered",
            MemoryKind::Managed => "managed",
            MemoryKind::PinnedHost => "pinned-host",
            MemoryKind::RegisteredHost => "registered-host",
            MemoryKind::Mapped => "mapped",
            MemoryKind::GraphOwned => "graph-owned",
            MemoryKind::Annotated => "annotated",
        }
    }

    /// Whether the host can touch it directly (a copy to or from it is a host access).
    pub fn is_host(self) -> bool {
        matches!(self, MemoryKind::PinnedHost | MemoryKind::RegisteredHost)
    }
}

/// A buffer's mutable state.
#[derive(Debug, Default)]
pub struct BufferState {
    /// The free, once freed.
    pub freed: Option<OpRecord>,
    pub shadow: Shadow,
}

#[derive(Debug)]
pub struct Buffer {
    /// Numbered in allocation order.
    pub id: u64,
    pub base: u64,
    pub size: u64,
    pub kind: MemoryKind,
    pub ctx: u64,
    /// The allocation: its epoch is on the allocating stream, or the host's for a
    /// synchronous allocation.
    pub alloc: OpRecord,
    /// Mirrors `state.freed.is_some()`, readable without the lock.
    freed: AtomicBool,
    state: Mutex<BufferState>,
}

impl Buffer {
    pub fn new(id: u64, base: u64, size: u64, kind: MemoryKind, ctx: u64, alloc: OpRecord) -> Buffer {
        Buffer { id, base, size, kind, ctx, alloc, freed: AtomicBool::new(false), state: Mutex::new(BufferState::default()) }
    }

    pub fn end(&self) -> u64 {
        self.base + self.size.max(1)
    }

    pub fn contains(&self, addr: u64) -> bool {
        self.base <= addr && addr < self.end()
    }

    pub fn lock(&self) -> MutexGuard<'_, BufferState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }

    /// Marks the buffer freed by `free` (with its state locked by the caller).
    pub fn mark_freed(&self, state: &mut BufferState, free: OpRecord) {
        state.freed = Some(free);
        self.freed.store(true, Ordering::Release);
    }
}

/// What an address resolves to.
pub enum Found {
    Live(Arc<Buffer>),
    Freed(Arc<Buffer>),
    Nothing,
}

pub struct BufferMap {
    granules: DashMap<u64, Vec<Arc<Buffer>>>,
    quarantine: Mutex<VecDeque<Arc<Buffer>>>,
    /// Lowest and highest byte ever registered: a cheap first test for a kernel's words.
    low: AtomicU64,
    high: AtomicU64,
}

fn granules(base: u64, end: u64) -> impl Iterator<Item = u64> {
    (base >> GRANULE_SHIFT)..=((end - 1) >> GRANULE_SHIFT)
}

impl BufferMap {
    pub fn new() -> BufferMap {
        BufferMap {
            granules: DashMap::new(),
            quarantine: Mutex::new(VecDeque::new()),
            low: AtomicU64::new(u64::MAX),
            high: AtomicU64::new(0),
        }
    }

    /// Whether `addr` could belong to a buffer at all.
    #[inline]
    pub fn in_range(&self, addr: u64) -> bool {
        addr >= self.low.load(Ordering::Relaxed) && addr < self.high.load(Ordering::Relaxed)
    }

    /// Registers a new buffer. Freed buffers it overlaps are forgotten, and so are live
    /// ones it overlaps without nesting inside them: their free went unseen.
    pub fn insert(&self, buffer: Arc<Buffer>) {
        let (base, end) = (buffer.base, buffer.end());
        for g in granules(base, end) {
            let mut entry = self.granules.entry(g).or_default();
            entry.retain(|b| {
                let overlaps = b.base < end && base < b.end();
                let encloses_new = b.base <= base && end <= b.end() && (b.base, b.end()) != (base, end);
                !overlaps || (encloses_new && !b.is_freed())
            });
            entry.push(buffer.clone());
        }
        self.low.fetch_min(base, Ordering::Relaxed);
        self.high.fetch_max(end, Ordering::Relaxed);
    }

    /// Finds what `addr` belongs to.
    pub fn find(&self, addr: u64) -> Found {
        if !self.in_range(addr) {
            return Found::Nothing;
        }
        let Some(entry) = self.granules.get(&(addr >> GRANULE_SHIFT)) else {
            return Found::Nothing;
        };
        let mut live: Option<&Arc<Buffer>> = None;
        let mut freed: Option<&Arc<Buffer>> = None;
        for b in entry.iter().filter(|b| b.contains(addr)) {
            if b.is_freed() {
                if freed.is_none_or(|f| b.id > f.id) {
                    freed = Some(b);
                }
            } else if live.is_none_or(|l| b.size < l.size) {
                live = Some(b);
            }
        }
        match (live, freed) {
            (Some(b), _) => Found::Live(b.clone()),
            (None, Some(b)) => Found::Freed(b.clone()),
            (None, None) => Found::Nothing,
        }
    }

    /// The live buffer that starts at `base`, if any.
    pub fn live_at(&self, base: u64) -> Option<Arc<Buffer>> {
        match self.find(base) {
            Found::Live(b) if b.base == base => Some(b),
            _ => None,
        }
    }

    /// Moves a freed buffer into quarantine, forgetting the oldest one beyond its size.
    pub fn quarantine(&self, buffer: Arc<Buffer>) {
        let evicted = {
            let mut q = self.quarantine.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back(buffer);
            if q.len() > QUARANTINE { q.pop_front() } else { None }
        };
        if let Some(old) = evicted {
            self.remove(&old);
        }
    }

    /// Forgets a buffer entirely.
    pub fn remove(&self, buffer: &Arc<Buffer>) {
        for g in granules(buffer.base, buffer.end()) {
            if let Some(mut entry) = self.granules.get_mut(&g) {
                entry.retain(|b| !Arc::ptr_eq(b, buffer));
            }
        }
    }

    /// Forgets every buffer of a context (destroyed or reset).
    pub fn remove_context(&self, ctx: u64) {
        for mut entry in self.granules.iter_mut() {
            entry.retain(|b| b.ctx != ctx);
        }
    }

    /// How many buffers are registered (live or quarantined).
    pub fn len(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        for entry in self.granules.iter() {
            for b in entry.iter() {
                seen.insert(b.id);
            }
        }
        seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for BufferMap {
    fn default() -> Self {
        BufferMap::new()
    }
}
