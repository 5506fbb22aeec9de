//! Allocation and free, stream-ordered and synchronous (`docs/semantics.md#allocation-and-free`):
//! an allocation is an operation every access must follow; a free must follow every access.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::model::buffers::{Buffer, MemoryKind};
use crate::model::clock::VectorClock;
use crate::model::definition::NodeKind;
use crate::model::op::{Mode, OpRecord, Origin};
use crate::model::race::{Action, BufferFacts, Race, RaceKind, Side};
use crate::model::residue::DENSE;
use crate::model::streams::StreamRef;
use crate::model::{Alloc, FreeOn, Model};

impl Model {
    /// An allocation: synchronous (`on: None`; its epoch is the host's) or stream-ordered
    /// (an operation on the stream, which every access must follow).
    pub fn alloc(&self, alloc: Alloc, on: Option<StreamRef>, origin: &Origin) {
        let epoch = match on {
            None => self.host.tick(),
            Some(key) => {
                let stream = self.stream(key);
                let node = || NodeKind::Alloc { base: alloc.base, size: alloc.size, ctx: alloc.ctx };
                if self.capture_node(&stream, node, origin, None) {
                    return;
                }
                self.issue_only(&stream)
            }
        };
        self.register(alloc, 0, OpRecord::new(origin, None, epoch));
    }

    /// A CUDA array of `size` bytes, `handle` to the driver: a synchronous allocation at keys
    /// of its own (`buffers::ARRAY_KEYS`), returned. Accesses name its bytes by those keys;
    /// it is freed at the first, like any buffer.
    pub fn alloc_array(&self, handle: u64, size: u64, ctx: u64, origin: &Origin) -> u64 {
        let base = self.buffers.array_keys(size);
        let epoch = self.host.tick();
        self.register(Alloc { base, size, kind: MemoryKind::Array, ctx }, handle, OpRecord::new(origin, None, epoch));
        base
    }

    /// Registers a buffer allocated by `op`; `handle`: the driver's, for memory without an
    /// address.
    pub(super) fn register(&self, alloc: Alloc, handle: u64, op: OpRecord) {
        let id = self.next_buffer.fetch_add(1, Ordering::Relaxed);
        let mut buffer = Buffer::new(id, alloc.base, alloc.size, alloc.kind, alloc.ctx, op);
        buffer.handle = handle;
        self.buffers.insert(Arc::new(buffer));
    }

    /// A free of the buffer at `base`: every earlier access must happen before it, or it is
    /// a free-race (`docs/semantics.md#allocation-and-free`).
    pub fn free(&self, base: u64, on: FreeOn, origin: &Origin) {
        let mut found = Vec::new();
        match on {
            FreeOn::Stream(key) => {
                let stream = self.stream(key);
                if self.capture_node(&stream, || NodeKind::Free { base }, origin, None) {
                    return;
                }
                let (state, epoch) = self.issue(&stream);
                self.release(base, OpRecord::new(origin, None, epoch), &state.clock, &mut found);
            }
            FreeOn::Synchronous { ctx } => {
                // Device-wide: the host first waits for every stream of the context.
                let ctx = self.buffers.live_at(base).map_or(ctx, |b| b.ctx);
                self.streams.host_waits_for_context(ctx, &self.host);
                let epoch = self.host.tick();
                let clock = self.host.snapshot();
                self.release(base, OpRecord::new(origin, None, epoch), &clock, &mut found);
            }
        }
        self.publish(found);
    }

    /// Frees the buffer at `base` by `op` (clock `clock`), checking what it must follow.
    pub(super) fn release(&self, base: u64, op: OpRecord, clock: &VectorClock, found: &mut Vec<Race>) {
        let Some(buffer) = self.buffers.live_at(base) else { return };
        let facts = BufferFacts::of(&buffer);
        let free = Side { op, action: Action::Free };
        if !buffer.alloc.epoch.happens_before(clock) {
            let alloc = Side { op: buffer.alloc, action: Action::Alloc };
            found.push(Race {
                kind: RaceKind::UseBeforeAlloc,
                hazard: None,
                buffer: facts,
                first: alloc,
                second: free,
            });
        }
        let mut state = buffer.lock();
        // How a free in one process is ordered after another's work is not followed.
        let peers = &self.peers;
        for earlier in state.shadow.unordered(clock).filter(|r| !peers.is_peer(r.op.epoch.slot)) {
            let first =
                Side { op: earlier.op, action: Action::Access { mode: earlier.mode, lo: earlier.lo, hi: earlier.hi } };
            found.push(Race { kind: RaceKind::FreeRace, hazard: None, buffer: facts, first, second: free });
        }
        buffer.mark_freed(&mut state, op);
        // A measured launch pending from before the free may have met the buffer: its late
        // check needs the history it met (kept until the buffer itself goes).
        if !self.pending.any() {
            state.shadow.clear();
        }
        drop(state);
        self.pending.observe((buffer.base, buffer.end(), DENSE), Mode::Write, buffer.id, Some(facts), op, clock);
        if buffer.kind.is_host() {
            // Freed pinned or unregistered host memory is the system allocator's again:
            // copies at those addresses later are copies of ordinary pageable memory.
            self.buffers.forget(&buffer);
        } else {
            self.buffers.quarantine(&buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::buffers::{MemoryKind, ARRAY_KEYS};
    use crate::model::op::{Access, HostEffect, Mode, Origin};
    use crate::model::race::RaceKind;
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, FreeOn, Model, Work};

    fn origin(api: &'static str) -> Origin {
        Origin::test(api, 0)
    }

    #[test]
    fn an_array_lives_at_keys_of_its_own_that_no_kernel_word_reaches() {
        let m = Model::default();
        m.alloc(Alloc { base: 0x10_0000, size: 4096, kind: MemoryKind::Device, ctx: 1 }, None, &origin("cuMemAlloc"));
        let first = m.alloc_array(0x5eed_0000, 100, 1, &origin("cuArrayCreate_v2"));
        let second = m.alloc_array(0x5eed_0010, 100, 1, &origin("cuArrayCreate_v2"));
        assert!(first >= ARRAY_KEYS && second > first + 100, "{first:#x} {second:#x}");
        assert_eq!(m.memory_kind(first + 99), Some(MemoryKind::Array));
        assert_eq!(m.memory_kind(first + 100), None, "the keys after an array are no one's");
        assert!(!m.buffer_range().contains(&first), "the kernel-word filter spans memory with addresses only");
        assert!(m.buffer_range().contains(&0x10_0000));
    }

    /// A graph node made before the array was destroyed, launched after.
    #[test]
    fn an_access_to_a_destroyed_array_is_a_use_after_free_naming_its_handle() {
        let m = Model::default();
        let key = m.alloc_array(0x5eed_0000, 256, 1, &origin("cuArrayCreate_v2"));
        m.free(key, FreeOn::Synchronous { ctx: 1 }, &origin("cuArrayDestroy"));
        let access = [Access::new(key + 16, 16, Mode::Read)];
        let work = Work { origin: origin("cuGraphLaunch"), kernel: None, accesses: &access, host: HostEffect::None };
        m.work(StreamRef::Legacy { ctx: 1 }, work);
        let races = m.races();
        assert_eq!(races.len(), 1);
        let race = races[0].race;
        assert_eq!((race.kind, race.buffer.kind), (RaceKind::UseAfterFree, MemoryKind::Array));
        assert_eq!((race.buffer.handle, race.buffer.base), (0x5eed_0000, key));
    }
}
