//! Known allocations, found by address: the innermost live buffer containing it, else the
//! most recently freed one, kept in a bounded quarantine for use-after-free. Buffers are
//! registered in every 2 MiB granule they touch; memory without an address (a CUDA array)
//! at keys of its own, from [`ARRAY_KEYS`] up.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::hash::{fast_map, FastMap};
use crate::thread_cache::ThreadCache;

use super::lock::{Guard, Lock};
use super::op::OpRecord;
use super::shadow::Shadow;

const GRANULE_SHIFT: u32 = 21;

/// The first key of memory without an address: a CUDA array has a handle, not a pointer, and
/// is a buffer at a range of keys from here up ([`BufferMap::array_keys`]). No pointer a
/// program holds lies this high (user-space and device addresses stay below 2^57), and kernel
/// parameter words are never tested against these keys ([`BufferMap::range`]).
pub const ARRAY_KEYS: u64 = 1 << 63;
/// Keys left unused after each array, so that an access running past an array's end meets
/// no other one.
const ARRAY_GAP: u64 = 1 << GRANULE_SHIFT;
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
    /// Exported by another process: `cuIpcOpenMemHandle`, `cuMemPoolImportPointer`.
    Imported,
    /// Allocated by a memory node of a graph.
    GraphOwned,
    /// Declared through streamsan's annotation API.
    Annotated,
    /// A CUDA array (`cuArrayCreate`, `cuArray3DCreate`), at keys from [`ARRAY_KEYS`] up.
    Array,
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
            MemoryKind::Imported => "imported",
            MemoryKind::GraphOwned => "graph-owned",
            MemoryKind::Annotated => "annotated",
            MemoryKind::Array => "array",
        }
    }

    /// Whether the host can touch it directly (a copy to or from it is a host access).
    pub fn is_host(self) -> bool {
        matches!(self, MemoryKind::PinnedHost | MemoryKind::RegisteredHost)
    }

    /// Whether the host's own loads and stores reach it while the device may use it: host
    /// memory (mapped into the device's address space under unified addressing) and managed
    /// memory.
    pub fn host_reachable(self) -> bool {
        self.is_host() || self == MemoryKind::Managed
    }
}

/// A buffer's mutable state: the shadow first, which every access reads.
#[derive(Debug, Default)]
#[repr(C)]
pub struct BufferState {
    pub shadow: Shadow,
    /// The free, once freed.
    pub freed: Option<OpRecord>,
    /// Its bytes shared with other processes through CUDA IPC, if they are (boxed: a word
    /// beside the shadow, for the many buffers never shared).
    pub shared: Option<Box<super::peers::Shared>>,
}

/// A buffer. Laid out in the order an access reads it (freed flag, kind and bounds, the
/// allocation's epoch, the lock and the shadow), so that those fields share two or three
/// cache lines instead of four: a launch touches several buffers, and in a program that does
/// more than launch they are no longer in the cache.
#[derive(Debug)]
#[repr(C)]
pub struct Buffer {
    /// Mirrors `state.freed.is_some()`, readable without the lock.
    freed: AtomicBool,
    pub kind: MemoryKind,
    pub base: u64,
    pub size: u64,
    /// The allocation: its epoch is on the allocating stream, or the host's for a
    /// synchronous allocation.
    pub alloc: OpRecord,
    state: Lock<BufferState>,
    /// Numbered in allocation order.
    pub id: u64,
    pub ctx: u64,
    /// The driver's handle of memory without an address (an array's `CUarray`, which reports
    /// name it by), 0 for memory with one.
    pub handle: u64,
}

impl Buffer {
    pub fn new(id: u64, base: u64, size: u64, kind: MemoryKind, ctx: u64, alloc: OpRecord) -> Buffer {
        Buffer {
            id,
            base,
            size,
            kind,
            ctx,
            handle: 0,
            alloc,
            freed: AtomicBool::new(false),
            state: Lock::new(BufferState::default()),
        }
    }

    pub fn end(&self) -> u64 {
        self.base + self.size.max(1)
    }

    pub fn lock(&self) -> Guard<'_, BufferState> {
        self.state.lock()
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

/// What an address resolves to: a buffer (owned, or borrowed from the map) or nothing.
pub enum Found<B = Arc<Buffer>> {
    Live(B),
    Freed(B),
    Nothing,
}

/// A run of the buffers of one granule, sorted by base (and, at one base, the larger
/// first), with the furthest end reached by each prefix of them: the search for an address
/// walks back from the last base at or below it and stops where no earlier buffer reaches it.
/// Bases, ends and reaches sit in arrays of their own, so that the binary search reads
/// contiguous words rather than one buffer after another.
#[derive(Default)]
struct Chunk {
    bases: Vec<u64>,
    ends: Vec<u64>,
    reach: Vec<u64>,
    buffers: Vec<Arc<Buffer>>,
}

impl Chunk {
    fn insert(&mut self, buffer: Arc<Buffer>) {
        let key = (buffer.base, std::cmp::Reverse(buffer.end()));
        let at = self.bases.partition_point(|&b| b < key.0);
        let at = at
            + self.ends[at..]
                .iter()
                .zip(&self.bases[at..])
                .take_while(|&(&e, &b)| (b, std::cmp::Reverse(e)) <= key)
                .count();
        self.bases.insert(at, buffer.base);
        self.ends.insert(at, buffer.end());
        self.buffers.insert(at, buffer);
        self.update_reach(at);
    }

    fn remove_at(&mut self, i: usize) {
        self.bases.remove(i);
        self.ends.remove(i);
        self.buffers.remove(i);
    }

    fn retain(&mut self, mut keep: impl FnMut(&Arc<Buffer>) -> bool) {
        let mut lowest = None;
        for i in (0..self.buffers.len()).rev() {
            if !keep(&self.buffers[i]) {
                self.remove_at(i);
                lowest = Some(i);
            }
        }
        if let Some(from) = lowest {
            self.update_reach(from);
        }
    }

    /// Removes the buffers overlapping `[base, end)` that `drop` selects.
    fn remove_overlapping(&mut self, base: u64, end: u64, mut drop: impl FnMut(&Arc<Buffer>) -> bool) {
        let mut i = self.bases.partition_point(|&b| b < end);
        let mut lowest = None;
        while i > 0 && self.reach[i - 1] > base {
            i -= 1;
            if base < self.ends[i] && drop(&self.buffers[i]) {
                self.remove_at(i);
                lowest = Some(i);
            }
        }
        if let Some(from) = lowest {
            self.update_reach(from);
        }
    }

    /// Recomputes `reach` from index `from` on.
    fn update_reach(&mut self, from: usize) {
        self.reach.truncate(from);
        let mut furthest = if from == 0 { 0 } else { self.reach[from - 1] };
        for &end in &self.ends[from..] {
            furthest = furthest.max(end);
            self.reach.push(furthest);
        }
    }

    /// The first live buffer containing `addr` met walking back from it; the most recently
    /// freed one met on the way goes to `freed`.
    fn find<'a>(&'a self, addr: u64, freed: &mut Option<&'a Arc<Buffer>>) -> Option<&'a Arc<Buffer>> {
        let mut i = self.bases.partition_point(|&b| b <= addr);
        while i > 0 && self.reach[i - 1] > addr {
            i -= 1;
            if addr >= self.ends[i] {
                continue;
            }
            let b = &self.buffers[i];
            if !b.is_freed() {
                return Some(b);
            }
            if freed.is_none_or(|f| b.id > f.id) {
                *freed = Some(b);
            }
        }
        None
    }

    /// The furthest end of its buffers.
    fn end(&self) -> u64 {
        self.reach.last().copied().unwrap_or(0)
    }

    /// Moves its upper half into a new chunk, never splitting buffers of one base (a new
    /// buffer at that base goes to the chunk where it sorts among them).
    fn split(&mut self) -> Option<Chunk> {
        let mut half = self.bases.len() / 2;
        while half < self.bases.len() && self.bases[half] == self.bases[half - 1] {
            half += 1;
        }
        if half == self.bases.len() {
            return None;
        }
        let mut upper = Chunk {
            bases: self.bases.split_off(half),
            ends: self.ends.split_off(half),
            reach: Vec::new(),
            buffers: self.buffers.split_off(half),
        };
        self.update_reach(0);
        upper.update_reach(0);
        Some(upper)
    }
}

/// Buffers per chunk of a granule, at most: an insertion or removal moves at most this many
/// entries, however many buffers the granule holds (a stream-ordered pool packs thousands).
const CHUNK: usize = 256;

/// The buffers with bytes in one granule, in chunks sorted by base, with the furthest end
/// reached by each prefix of chunks: a search binary-searches the chunks, then walks back as
/// within a chunk.
#[derive(Default)]
struct Granule {
    chunks: Vec<Chunk>,
    /// The first base of each chunk.
    firsts: Vec<u64>,
    /// The furthest end of the buffers of each prefix of chunks.
    reach: Vec<u64>,
}

impl Granule {
    fn insert(&mut self, buffer: Arc<Buffer>) {
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::default());
        }
        let c = self.firsts.partition_point(|&b| b <= buffer.base).saturating_sub(1);
        self.chunks[c].insert(buffer);
        if self.chunks[c].bases.len() > 2 * CHUNK {
            if let Some(upper) = self.chunks[c].split() {
                self.chunks.insert(c + 1, upper);
            }
        }
        self.update(c);
    }

    /// Drops empty chunks and recomputes `firsts` and `reach` from chunk `from` on.
    fn update(&mut self, from: usize) {
        self.chunks.retain(|c| !c.bases.is_empty());
        let from = from.min(self.chunks.len());
        self.firsts.truncate(from);
        self.reach.truncate(from);
        let mut furthest = if from == 0 { 0 } else { self.reach[from - 1] };
        for chunk in &self.chunks[from..] {
            self.firsts.push(chunk.bases[0]);
            furthest = furthest.max(chunk.end());
            self.reach.push(furthest);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&Arc<Buffer>) -> bool) {
        for chunk in &mut self.chunks {
            chunk.retain(&mut keep);
        }
        self.update(0);
    }

    /// Removes the buffers overlapping `[base, end)` that `drop` selects.
    fn remove_overlapping(&mut self, base: u64, end: u64, mut drop: impl FnMut(&Arc<Buffer>) -> bool) {
        let mut c = self.firsts.partition_point(|&b| b < end);
        let mut lowest = None;
        while c > 0 && self.reach[c - 1] > base {
            c -= 1;
            let before = self.chunks[c].bases.len();
            self.chunks[c].remove_overlapping(base, end, &mut drop);
            if self.chunks[c].bases.len() != before {
                lowest = Some(c);
            }
        }
        if let Some(from) = lowest {
            self.update(from);
        }
    }

    /// The innermost live buffer containing `addr`, else the most recently freed one. With
    /// buffers nested properly, the first live one met walking back is the innermost.
    fn find(&self, addr: u64) -> Found<&Arc<Buffer>> {
        let mut freed: Option<&Arc<Buffer>> = None;
        let mut c = self.firsts.partition_point(|&b| b <= addr);
        while c > 0 && self.reach[c - 1] > addr {
            c -= 1;
            if let Some(live) = self.chunks[c].find(addr, &mut freed) {
                return Found::Live(live);
            }
        }
        match freed {
            Some(b) => Found::Freed(b),
            None => Found::Nothing,
        }
    }
}

/// The bytes of a buffer that an access reads: its flag, kind, bounds and allocation, then
/// its lock and shadow (both structures are laid out in that order).
const READ_BY_AN_ACCESS: usize = std::mem::offset_of!(Buffer, state) + std::mem::size_of::<Lock<Shadow>>();

/// Asks for the cache lines of `[at, at + len)` to be loaded; a hint, which reads nothing.
#[inline]
fn prefetch_lines(at: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut line = at as usize & !63;
        while line < at as usize + len {
            // SAFETY: a prefetch is a hint: it neither faults nor reads memory in Rust's sense.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}

/// A freed buffer in quarantine: where it was, and which one.
struct Quarantined {
    base: u64,
    end: u64,
    id: u64,
}

pub struct BufferMap {
    granules: FastMap<u64, Granule>,
    quarantine: Mutex<VecDeque<Quarantined>>,
    /// Lowest and highest byte ever registered: a cheap first test for a kernel's words.
    low: AtomicU64,
    high: AtomicU64,
    /// The same for memory the host reaches ([`MemoryKind::host_reachable`]): the first test
    /// of a launch's accesses for the host-race guard.
    host_low: AtomicU64,
    host_high: AtomicU64,
    /// Tells this map's entries in [`RECENT`] from another map's.
    id: u64,
    /// The next unused key of memory without an address ([`ARRAY_KEYS`]).
    next_key: AtomicU64,
    /// Bumped after every change that can make an address resolve to another live buffer:
    /// a buffer registered over a live one (nested, or over one whose free went unseen), or
    /// live buffers forgotten. Registering over free memory or freed buffers changes no
    /// live answer, and a freed buffer is told by its own flag.
    generation: AtomicU64,
}

/// Unique map ids.
static NEXT_MAP: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The live buffers this thread found lately, by (map, address) ([`crate::thread_cache`]): a
    /// few thousand, so that a step's kernels with dozens of pointers each on several streams
    /// still find theirs here (a miss takes a shared lock and a reference count).
    static RECENT: RefCell<ThreadCache<(u64, u64), Arc<Buffer>, 2048>> = RefCell::new(ThreadCache::default());
}

fn granules(base: u64, end: u64) -> impl Iterator<Item = u64> {
    (base >> GRANULE_SHIFT)..=((end - 1) >> GRANULE_SHIFT)
}

impl BufferMap {
    pub fn new() -> BufferMap {
        BufferMap {
            granules: fast_map(),
            quarantine: Mutex::new(VecDeque::new()),
            low: AtomicU64::new(u64::MAX),
            high: AtomicU64::new(0),
            host_low: AtomicU64::new(u64::MAX),
            host_high: AtomicU64::new(0),
            id: NEXT_MAP.fetch_add(1, Ordering::Relaxed),
            next_key: AtomicU64::new(ARRAY_KEYS),
            generation: AtomicU64::new(0),
        }
    }

    /// To be called after a change that can make an address resolve to another live buffer.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Where every buffer with an address lies, from the lowest byte ever registered to the
    /// highest (empty before the first): the first test of a kernel's parameter words.
    #[inline]
    pub fn range(&self) -> core::ops::Range<u64> {
        self.low.load(Ordering::Relaxed)..self.high.load(Ordering::Relaxed)
    }

    /// Where every buffer the host reaches lies, as [`Self::range`] for all.
    #[inline]
    pub fn host_range(&self) -> core::ops::Range<u64> {
        self.host_low.load(Ordering::Relaxed)..self.host_high.load(Ordering::Relaxed)
    }

    /// Whether `addr` could belong to a buffer with an address.
    #[inline]
    fn in_range(&self, addr: u64) -> bool {
        self.range().contains(&addr)
    }

    /// Whether `addr` could belong to any buffer: one with an address, or an array's keys.
    #[inline]
    fn may_hold(&self, addr: u64) -> bool {
        self.in_range(addr) || addr >= ARRAY_KEYS
    }

    /// `size` keys for memory without an address, never handed out before.
    pub fn array_keys(&self, size: u64) -> u64 {
        let span = size.max(1).div_ceil(ARRAY_GAP) * ARRAY_GAP + ARRAY_GAP;
        self.next_key.fetch_add(span, Ordering::Relaxed)
    }

    /// Makes [`Self::range`] take `[base, end)`: memory registered now, or whose address
    /// is known before it is (a graph's mem alloc node, which kernel nodes added after it
    /// name before any launch allocates it).
    pub fn widen(&self, base: u64, end: u64) {
        // Read first: most buffers widen nothing, and a read is no read-modify-write.
        if base < self.low.load(Ordering::Relaxed) {
            self.low.fetch_min(base, Ordering::Relaxed);
        }
        if end > self.high.load(Ordering::Relaxed) {
            self.high.fetch_max(end, Ordering::Relaxed);
        }
    }

    /// Registers a new buffer. Freed buffers it overlaps are forgotten, and so are live
    /// ones it overlaps without nesting inside them: their free went unseen.
    pub fn insert(&self, buffer: Arc<Buffer>) {
        let (base, end) = (buffer.base, buffer.end());
        let mut over_live = false;
        for g in granules(base, end) {
            let mut granule = self.granules.entry(g).or_default();
            granule.remove_overlapping(base, end, |b| {
                over_live |= !b.is_freed();
                let encloses_new = b.base <= base && end <= b.end() && (b.base, b.end()) != (base, end);
                !encloses_new || b.is_freed()
            });
            granule.insert(buffer.clone());
        }
        if base < ARRAY_KEYS {
            self.widen(base, end);
            if buffer.kind.host_reachable() {
                self.host_low.fetch_min(base, Ordering::Relaxed);
                self.host_high.fetch_max(end, Ordering::Relaxed);
            }
        }
        if over_live {
            self.changed();
        }
    }

    /// Finds what `addr` belongs to.
    pub fn find(&self, addr: u64) -> Found {
        if !self.may_hold(addr) {
            return Found::Nothing;
        }
        match self.granules.get(&(addr >> GRANULE_SHIFT)) {
            Some(granule) => match granule.find(addr) {
                Found::Live(b) => Found::Live(b.clone()),
                Found::Freed(b) => Found::Freed(b.clone()),
                Found::Nothing => Found::Nothing,
            },
            None => Found::Nothing,
        }
    }

    /// Calls `f` with what `addr` belongs to, borrowed: on the launch path, which looks up
    /// every pointer, no lock is taken and no reference count touched when the thread
    /// resolved the same address lately ([`RECENT`]). `f` must not register, free or remove
    /// buffers.
    #[inline]
    pub fn with<R>(&self, addr: u64, f: impl FnOnce(Found<&Arc<Buffer>>) -> R) -> R {
        if !self.may_hold(addr) {
            return f(Found::Nothing);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let key = (self.id, addr);
        let mut f = Some(f);
        let cached = RECENT.try_with(|recent| {
            let recent = recent.try_borrow().ok()?;
            let buffer = recent.get(&key, generation).filter(|b| !b.is_freed())?;
            Some((f.take()?)(Found::Live(buffer)))
        });
        if let Ok(Some(result)) = cached {
            return result;
        }
        let f = f.take().expect("not called yet");
        let found = self.find(addr);
        let result = match &found {
            Found::Live(b) => f(Found::Live(b)),
            Found::Freed(b) => f(Found::Freed(b)),
            Found::Nothing => f(Found::Nothing),
        };
        if let Found::Live(buffer) = found {
            let _ = RECENT.try_with(|recent| {
                if let Ok(mut recent) = recent.try_borrow_mut() {
                    recent.put(key, generation, buffer);
                }
            });
        }
        result
    }

    /// Starts loading into the processor's caches the buffers that `addrs` resolved to lately
    /// on this thread, without waiting for them: an operation's accesses are prefetched
    /// together before any is checked, so that their buffers arrive in parallel rather than
    /// one after another. Under a real driver, whose own work between two launches evicts the
    /// model's data, each of those loads is a miss.
    #[inline]
    pub fn prefetch(&self, addrs: impl Iterator<Item = u64>) {
        let generation = self.generation.load(Ordering::Acquire);
        let _ = RECENT.try_with(|recent| {
            let Ok(recent) = recent.try_borrow() else { return };
            for addr in addrs.filter(|&addr| self.in_range(addr)) {
                if let Some(buffer) = recent.get(&(self.id, addr), generation) {
                    prefetch_lines(Arc::as_ptr(buffer).cast(), READ_BY_AN_ACCESS);
                }
            }
        });
    }

    /// Up to `limit` live buffers of `kind`, newest first, as `[base, end)`: a walk of the
    /// whole map, for work that is rare (the host-race guard's measured launches).
    pub fn live_of_kind(&self, kind: MemoryKind, limit: usize) -> Vec<(u64, u64)> {
        let mut found: Vec<(u64, u64, u64)> = Vec::new();
        for granule in self.granules.iter() {
            for chunk in &granule.chunks {
                for b in chunk.buffers.iter().filter(|b| b.kind == kind && !b.is_freed()) {
                    found.push((b.id, b.base, b.end()));
                }
            }
        }
        found.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        found.dedup_by_key(|b| b.0);
        found.into_iter().take(limit).map(|(_, base, end)| (base, end)).collect()
    }

    /// The live buffer that starts at `base`, if any.
    pub fn live_at(&self, base: u64) -> Option<Arc<Buffer>> {
        match self.find(base) {
            Found::Live(b) if b.base == base => Some(b),
            _ => None,
        }
    }

    /// Puts a freed buffer in quarantine, forgetting the oldest one beyond its size.
    ///
    /// The quarantine names buffers, it does not own them: a buffer whose bytes are
    /// allocated again leaves its granules then, and its memory is released at once (warm),
    /// not when the quarantine forgets it sixty thousand frees later (cold).
    pub fn quarantine(&self, buffer: &Buffer) {
        let evicted = {
            let mut q = self.quarantine.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back(Quarantined { base: buffer.base, end: buffer.end(), id: buffer.id });
            if q.len() > QUARANTINE {
                q.pop_front()
            } else {
                None
            }
        };
        if let Some(old) = evicted {
            self.remove(old.base, old.end, old.id);
        }
    }

    /// Forgets a freed buffer at once, without quarantine: its addresses stop being memory
    /// the model knows (a freed pinned host range goes back to the system allocator as
    /// ordinary pageable memory).
    pub fn forget(&self, buffer: &Buffer) {
        self.remove(buffer.base, buffer.end(), buffer.id);
    }

    fn remove(&self, base: u64, end: u64, id: u64) {
        for g in granules(base, end) {
            if let Some(mut granule) = self.granules.get_mut(&g) {
                granule.remove_overlapping(base, end, |b| b.id == id);
            }
        }
    }

    /// Forgets every buffer of a context (destroyed or reset).
    pub fn remove_context(&self, ctx: u64) {
        for mut granule in self.granules.iter_mut() {
            granule.retain(|b| b.ctx != ctx);
        }
        self.changed();
    }
}

impl Default for BufferMap {
    fn default() -> Self {
        BufferMap::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::clock::Epoch;
    use crate::model::op::{Origin, StackId, ThreadId};

    fn buffer(map: &BufferMap, id: u64, base: u64, size: u64) -> Arc<Buffer> {
        let origin = Origin { api: "test", thread: ThreadId(1), site: StackId(0) };
        let b = Arc::new(Buffer::new(
            id,
            base,
            size,
            MemoryKind::Device,
            1,
            OpRecord::new(&origin, None, Epoch::new(0, 1)),
        ));
        map.insert(b.clone());
        b
    }

    fn found(map: &BufferMap, addr: u64) -> Option<(bool, u64)> {
        seen(map.find(addr))
    }

    /// [`seen`] for `BufferMap::with`, whose callback borrows the buffer.
    fn seen_by_thread(found: Found<&Arc<Buffer>>) -> Option<(bool, u64)> {
        seen(found)
    }

    /// Whether a buffer was found, live or freed, and its id.
    fn seen<B: AsRef<Buffer>>(found: Found<B>) -> Option<(bool, u64)> {
        match found {
            Found::Live(b) => Some((true, b.as_ref().id)),
            Found::Freed(b) => Some((false, b.as_ref().id)),
            Found::Nothing => None,
        }
    }

    #[test]
    fn packed_buffers_are_found_by_address() {
        let map = BufferMap::new();
        for i in 0..4096 {
            buffer(&map, i, 0x1000_0000 + i * 512, 64);
        }
        assert_eq!(found(&map, 0x1000_0000 + 17 * 512 + 63), Some((true, 17)));
        assert_eq!(found(&map, 0x1000_0000 + 17 * 512 + 64), None, "the gap after a buffer");
        assert_eq!(found(&map, 0x0fff_ffff), None);
    }

    #[test]
    fn the_innermost_live_buffer_wins_then_the_latest_freed() {
        let map = BufferMap::new();
        let pool = buffer(&map, 1, 0x2000_0000, 8 << 20); // spans four granules
        let block = buffer(&map, 2, 0x2030_0000, 4096);
        let same_base = buffer(&map, 3, 0x2030_0000, 256);
        assert_eq!(found(&map, 0x2030_0010), Some((true, 3)));
        assert_eq!(found(&map, 0x2030_0200), Some((true, 2)));
        assert_eq!(found(&map, 0x2070_0000), Some((true, 1)));
        block.mark_freed(&mut block.lock(), block.alloc);
        same_base.mark_freed(&mut same_base.lock(), same_base.alloc);
        assert_eq!(found(&map, 0x2030_0010), Some((true, 1)), "live enclosing before freed nested");
        pool.mark_freed(&mut pool.lock(), pool.alloc);
        assert_eq!(found(&map, 0x2030_0010), Some((false, 3)), "the most recently freed");
        // A new allocation over freed bytes forgets them where it lies.
        buffer(&map, 4, 0x2030_0000, 128);
        assert_eq!(found(&map, 0x2030_0010), Some((true, 4)));
        assert_eq!(found(&map, 0x2030_0100), None);
        assert_eq!(found(&map, 0x2070_0000), Some((false, 1)));
    }

    #[test]
    fn a_buffer_registered_just_below_another_leaves_it_alone() {
        let map = BufferMap::new();
        // A first buffer, so that the chunk's buffers are searched past its first base.
        buffer(&map, 0, 0x2000_0000, 256);
        buffer(&map, 1, 0x2000_1000, 256);
        buffer(&map, 2, 0x2000_0f00, 256);
        assert_eq!(found(&map, 0x2000_1000), Some((true, 1)));
        assert_eq!(found(&map, 0x2000_0fff), Some((true, 2)));
    }

    #[test]
    fn more_nested_buffers_at_one_base_than_a_chunk_holds_are_found() {
        let map = BufferMap::new();
        for i in 0..100 {
            buffer(&map, i, 0x3000_0000 + i * 64, 64);
        }
        // More than a chunk holds, each nested in the one before: the chunk splits around them.
        let nested = 2 * CHUNK as u64;
        for i in 0..nested {
            buffer(&map, 100 + i, 0x3010_0000, 4 * nested - i);
        }
        assert_eq!(found(&map, 0x3010_0000), Some((true, 99 + nested)));
        assert_eq!(found(&map, 0x3010_0000 + 4 * nested - 1), Some((true, 100)));
        assert_eq!(found(&map, 0x3000_0000 + 99 * 64), Some((true, 99)));
        // A chunk of one base's buffers only is never split, however often it is asked to.
        let map = BufferMap::new();
        for i in 0..nested + 2 {
            buffer(&map, i, 0x3010_0000, 4 * nested - i);
        }
        assert_eq!(found(&map, 0x3010_0000), Some((true, nested + 1)));
    }

    fn free(map: &BufferMap, b: &Buffer) {
        b.mark_freed(&mut b.lock(), b.alloc);
        map.quarantine(b);
    }

    #[test]
    fn the_quarantine_forgets_the_oldest_freed_buffer_only() {
        let map = BufferMap::new();
        let first = buffer(&map, 0, 0x3000_0000, 64);
        free(&map, &first);
        // Its address allocated again and freed: the quarantine names both.
        let again = buffer(&map, 1, 0x3000_0000, 64);
        free(&map, &again);
        for i in 2..QUARANTINE as u64 {
            let b = buffer(&map, i, 0x4000_0000 + i * 64, 64);
            free(&map, &b);
        }
        assert_eq!(found(&map, 0x3000_0000), Some((false, 1)), "still in quarantine");
        // Forgetting `first` (already gone from its granule) leaves `again` findable.
        let b = buffer(&map, 1 << 20, 0x5000_0000, 64);
        free(&map, &b);
        assert_eq!(found(&map, 0x3000_0000), Some((false, 1)));
        let b = buffer(&map, (1 << 20) + 1, 0x5000_0040, 64);
        free(&map, &b);
        assert_eq!(found(&map, 0x3000_0000), None, "forgotten once QUARANTINE frees came after it");
        assert_eq!(found(&map, 0x4000_0000 + 2 * 64), Some((false, 2)));
    }

    #[test]
    fn a_granule_of_many_chunks_finds_nested_and_freed_buffers() {
        let map = BufferMap::new();
        // Ten chunks' worth of 64-byte buffers, and one enclosing the lot registered first.
        let pool = buffer(&map, 0, 0x6000_0000, 10 * 2 * CHUNK as u64 * 64);
        let small: Vec<Arc<Buffer>> =
            (1..=10 * 2 * CHUNK as u64).map(|i| buffer(&map, i, 0x6000_0000 + (i - 1) * 64, 64)).collect();
        assert_eq!(found(&map, 0x6000_0000 + 1000 * 64 + 5), Some((true, 1001)));
        // Freed small buffers leave the enclosing one found; forgotten ones too.
        for b in &small[990..1010] {
            free(&map, b);
        }
        assert_eq!(found(&map, 0x6000_0000 + 1000 * 64 + 5), Some((true, 0)), "the live enclosing buffer");
        map.granules.get_mut(&(0x6000_0000 >> GRANULE_SHIFT)).unwrap().retain(|b| !b.is_freed());
        assert_eq!(found(&map, 0x6000_0000 + 1000 * 64 + 5), Some((true, 0)));
        free(&map, &pool);
        assert_eq!(found(&map, 0x6000_0000 + 1000 * 64 + 5), Some((false, 0)), "then the freed one");
        assert_eq!(found(&map, 0x6000_0000 + 3000 * 64 + 5), Some((true, 3001)));
        let granule = map.granules.get(&(0x6000_0000 >> GRANULE_SHIFT)).unwrap();
        assert!(granule.chunks.len() >= 10 && granule.chunks.iter().all(|c| c.bases.len() <= 2 * CHUNK));
    }

    #[test]
    fn a_chunk_emptied_by_forgetting_leaves_the_chunks_after_it_found() {
        let base = 0x7000_0000;
        let count = 4 * CHUNK as u64;
        for emptied in 0..3 {
            let map = BufferMap::new();
            let all: Vec<Arc<Buffer>> = (0..count).map(|i| buffer(&map, i, base + i * 64, 64)).collect();
            // Every buffer of one chunk forgotten: the chunk is dropped, the others found.
            let granule = map.granules.get(&(base >> GRANULE_SHIFT)).unwrap();
            let gone: Vec<u64> = granule.chunks[emptied].buffers.iter().map(|b| b.id).collect();
            drop(granule);
            for &id in &gone {
                map.forget(&all[id as usize]);
            }
            buffer(&map, count, base + count * 64, 64);
            for i in 0..=count {
                let expected = (!gone.contains(&i)).then_some((true, i));
                assert_eq!(found(&map, base + i * 64), expected, "chunk {emptied} emptied");
            }
        }
    }

    #[test]
    fn the_thread_s_recent_lookups_follow_buffers_registered_over_live_ones() {
        let map = BufferMap::new();
        buffer(&map, 1, 0x8000_0000, 4096);
        assert_eq!(map.with(0x8000_0100, seen_by_thread), Some((true, 1)));
        assert_eq!(map.with(0x8000_0100, seen_by_thread), Some((true, 1)), "from the thread's recent lookups");
        buffer(&map, 2, 0x8000_0100, 256);
        assert_eq!(map.with(0x8000_0100, seen_by_thread), Some((true, 2)), "a buffer nested in a live one");
        buffer(&map, 3, 0x8000_0000, 8192);
        assert_eq!(map.with(0x8000_0100, seen_by_thread), Some((true, 3)), "over live ones whose free went unseen");
        map.remove_context(1);
        assert_eq!(map.with(0x8000_0100, seen_by_thread), None, "its context gone");
    }

    #[test]
    fn keys_for_memory_without_an_address_are_never_handed_out_twice() {
        let map = BufferMap::new();
        let size = 3 * ARRAY_GAP + 1;
        let first = map.array_keys(size);
        let second = map.array_keys(64);
        assert!(first >= ARRAY_KEYS);
        assert!(second >= first + size, "the second array's keys begin past the first's");
    }

    #[test]
    fn a_forgotten_buffer_is_no_memory_the_map_knows() {
        let map = BufferMap::new();
        let kept = buffer(&map, 1, 0x9000_0000, 64);
        let gone = buffer(&map, 2, 0x9000_0040, 64);
        gone.mark_freed(&mut gone.lock(), gone.alloc);
        map.forget(&gone);
        assert_eq!(found(&map, 0x9000_0040), None);
        assert_eq!(found(&map, 0x9000_0000), Some((true, kept.id)));
    }

    #[test]
    fn the_live_buffer_at_an_address_is_one_that_starts_there() {
        let map = BufferMap::new();
        let b = buffer(&map, 1, 0x9100_0000, 4096);
        assert_eq!(map.live_at(0x9100_0000).map(|b| b.id), Some(b.id));
        assert!(map.live_at(0x9100_0100).is_none(), "inside it, not its start");
    }
}
