//! What the shim and the report ask of the model (kernels interned, memory kinds, where
//! buffers may lie), and the findings, read at exit and forgotten in a forked child.

use super::buffers::{Found, MemoryKind};
use super::clock::Epoch;
use super::op::KernelId;
use super::race::{Note, Race, RaceEntry};
use super::streams::SlotOwner;
use super::Model;

impl Model {
    /// The id of a kernel, by its symbol (the name the driver gives, mangled for C++) and
    /// its name as people read it (demangled), interned on first use.
    pub fn kernel_id(&self, name: &str, symbol: &str) -> KernelId {
        let mut k = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = k.0.get(symbol) {
            return KernelId(id);
        }
        let id = k.1.len() as u32;
        k.1.push((name.to_string(), symbol.to_string()));
        k.0.insert(symbol.to_string(), id);
        KernelId(id)
    }

    /// A kernel's name, demangled.
    pub fn kernel_name(&self, id: KernelId) -> String {
        let k = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        k.1.get(id.0 as usize).map(|(name, _)| name.clone()).unwrap_or_default()
    }

    /// A kernel's symbol, as the driver names it (mangled for C++).
    pub fn kernel_symbol(&self, id: KernelId) -> String {
        let k = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        k.1.get(id.0 as usize).map(|(_, symbol)| symbol.clone()).unwrap_or_default()
    }

    /// Who issued the operation `epoch` (for reports).
    pub fn slot_owner(&self, epoch: Epoch) -> SlotOwner {
        self.streams.slots.owner(epoch)
    }

    /// Where buffers may lie: a word outside is no buffer's address (the cheap filter for a
    /// kernel's parameter words, read once a launch).
    #[inline]
    pub fn buffer_range(&self) -> core::ops::Range<u64> {
        self.buffers.range()
    }

    /// Where buffers the host reaches may lie (managed and host memory): a launch with no
    /// access there has nothing for the host-race guard.
    #[inline]
    pub fn host_reachable_range(&self) -> core::ops::Range<u64> {
        self.buffers.host_range()
    }

    /// The live buffer at `addr` the host reaches, as `[base, end)`.
    pub fn host_reachable_at(&self, addr: u64) -> Option<(u64, u64)> {
        match self.buffers.find(addr) {
            Found::Live(b) if b.kind.host_reachable() => Some((b.base, b.end())),
            _ => None,
        }
    }

    /// The kind of live memory at `addr`.
    pub fn memory_kind(&self, addr: u64) -> Option<MemoryKind> {
        match self.buffers.find(addr) {
            Found::Live(b) => Some(b.kind),
            _ => None,
        }
    }

    /// Whether `addr` is in a buffer, live or freed (a kernel word worth recording).
    pub fn is_tracked(&self, addr: u64) -> bool {
        !matches!(self.buffers.find(addr), Found::Nothing)
    }

    pub fn races(&self) -> Vec<RaceEntry> {
        self.races.entries()
    }

    /// Forgets the races and notes found so far, keeping what is ordered with what: a forked
    /// child reports what it finds itself, not its parent's findings again.
    pub fn forget_findings(&self) {
        self.races.clear();
        self.notes.clear();
    }

    pub fn notes(&self) -> Vec<Note> {
        self.notes.entries()
    }

    /// Keeps the races not found before, and tells the sink of each as it is kept.
    pub(super) fn publish(&self, found: Vec<Race>) {
        for race in found {
            if self.races.add(race) {
                self.streams.slots.pin(race.first.op.epoch);
                self.streams.slots.pin(race.second.op.epoch);
                if let Some(sink) = &self.sink {
                    sink.race(&RaceEntry { race, count: 1 });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::{Access, HostEffect, Mode, Origin};
    use crate::model::streams::StreamRef;
    use crate::model::{Alloc, FreeOn, Work};

    fn origin(api: &'static str) -> Origin {
        Origin::test(api, 1)
    }

    /// A model with a 64-byte device buffer at 0x1000 and streams 0x10 and 0x20.
    fn two_streams() -> Model {
        let model = Model::default();
        model.alloc(Alloc { base: 0x1000, size: 64, kind: MemoryKind::Device, ctx: 1 }, None, &origin("cuMemAlloc_v2"));
        for handle in [0x10, 0x20] {
            model.stream_created(handle, 1, true, &origin("cuStreamCreate"));
        }
        model
    }

    /// A memset of the buffer's first 8 bytes on stream `handle`.
    fn memset(model: &Model, handle: u64) {
        let write = [Access::new(0x1000, 8, Mode::Write)];
        let work = Work { origin: origin("cuMemsetD8Async"), kernel: None, accesses: &write, host: HostEffect::None };
        model.work(StreamRef::Handle(handle), work);
    }

    /// A race between memsets of the buffer on streams 0x10 and 0x20; both streams are then
    /// synchronized and destroyed, and `churn` streams, doing nothing, created and destroyed
    /// one after the other (each takes the slot the one before gave back). The handles the
    /// model names for the race's two operations.
    fn race_then_churn(churn: u64) -> (Option<u64>, Option<u64>) {
        let model = two_streams();
        memset(&model, 0x10);
        memset(&model, 0x20);
        let race = model.races()[0].race;
        for handle in [0x10, 0x20] {
            model.stream_synchronized(StreamRef::Handle(handle));
            model.stream_destroyed(handle, &origin("cuStreamDestroy"));
        }
        for handle in 0x100..0x100 + churn {
            model.stream_created(handle, 1, true, &origin("cuStreamCreate"));
            model.stream_destroyed(handle, &origin("cuStreamDestroy"));
        }
        let handle = |epoch| match model.slot_owner(epoch) {
            SlotOwner::Stream { handle, .. } => Some(handle),
            _ => None,
        };
        (handle(race.first.op.epoch), handle(race.second.op.epoch))
    }

    #[test]
    fn a_kernel_is_interned_once_and_keeps_both_its_names() {
        let model = Model::default();
        let scale = model.kernel_id("scale(float*)", "_Z5scalePf");
        assert_eq!(model.kernel_id("scale(float*)", "_Z5scalePf"), scale);
        let add = model.kernel_id("add", "add");
        assert_ne!(add, scale);
        assert_eq!(
            (model.kernel_name(scale), model.kernel_symbol(scale)),
            ("scale(float*)".into(), "_Z5scalePf".into())
        );
        assert_eq!(model.kernel_name(add), "add");
    }

    #[test]
    fn an_address_is_tracked_in_a_buffer_live_or_freed() {
        let model = two_streams();
        assert!(model.is_tracked(0x1000) && model.is_tracked(0x103f));
        assert!(!model.is_tracked(0x1040) && !model.is_tracked(0xfff));
        model.free(0x1000, FreeOn::Synchronous { ctx: 1 }, &origin("cuMemFree_v2"));
        assert!(model.is_tracked(0x1000), "freed, its bytes are remembered for a use after free");
    }

    #[test]
    fn an_owner_that_did_nothing_does_not_take_the_operations_of_those_before() {
        // The first stream after 0x20 gives its slot back at its clock's 0: the next one
        // must not be taken for the owner of 0x20's memset.
        assert_eq!(race_then_churn(3), (Some(0x10), Some(0x20)));
    }

    #[test]
    fn the_first_operation_of_a_stream_after_one_that_did_nothing_is_named_its_own() {
        let model = two_streams();
        memset(&model, 0x10);
        model.stream_synchronized(StreamRef::Handle(0x10));
        model.stream_destroyed(0x10, &origin("cuStreamDestroy"));
        // 0x30 takes 0x10's slot and gives it back unused; 0x40 takes it and races with 0x20.
        model.stream_created(0x30, 1, true, &origin("cuStreamCreate"));
        model.stream_destroyed(0x30, &origin("cuStreamDestroy"));
        model.stream_created(0x40, 1, true, &origin("cuStreamCreate"));
        memset(&model, 0x40);
        memset(&model, 0x20);
        let race = model.races()[0].race;
        let handle = |epoch| match model.slot_owner(epoch) {
            SlotOwner::Stream { handle, .. } => Some(handle),
            _ => None,
        };
        assert_eq!((handle(race.first.op.epoch), handle(race.second.op.epoch)), (Some(0x40), Some(0x20)));
    }

    #[test]
    fn a_race_names_its_streams_however_many_streams_used_their_slots_since() {
        // Forty owners of 0x20's slot since: more than a slot remembers.
        assert_eq!(race_then_churn(40), (Some(0x10), Some(0x20)));
    }

    #[test]
    fn findings_forgotten_at_a_fork_are_found_anew() {
        let model = two_streams();
        memset(&model, 0x10);
        memset(&model, 0x20);
        model.stream_wait_event(StreamRef::Handle(0x10), 0xe, &origin("cuStreamWaitEvent"));
        assert_eq!((model.races().len(), model.notes().len()), (1, 1));
        model.forget_findings();
        assert!(model.races().is_empty() && model.notes().is_empty());
        // What is ordered with what is kept: 0x10's next memset races with 0x20's still, a
        // race found anew (counted once, not on top of the parent's count).
        memset(&model, 0x10);
        let races = model.races();
        assert_eq!((races.len(), races[0].count), (1, 1));
    }

    #[test]
    fn a_race_found_again_at_the_same_call_sites_is_counted_on_its_entry() {
        let model = two_streams();
        // Memsets on the two streams in turn: each after the first races with the one before.
        for handle in [0x10, 0x20, 0x10, 0x20] {
            memset(&model, handle);
        }
        let races = model.races();
        assert_eq!((races.len(), races[0].count), (1, 3));
    }
}
