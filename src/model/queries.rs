//! What the shim and the report ask of the model, and where its findings go.
//!
//! Kernel names are interned once so that an operation records a number, not a string; the
//! memory queries let the shim filter a kernel's parameter words before it builds accesses
//! (most words are not pointers into tracked memory); the findings are read at exit and
//! forgotten in a forked child, which reports only what it finds itself.

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

    /// Whether `addr` could be in a buffer: a cheap filter for a kernel's parameter words.
    #[inline]
    pub fn may_be_buffer(&self, addr: u64) -> bool {
        self.buffers.in_range(addr)
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
                if let Some(sink) = &self.sink {
                    sink.race(&RaceEntry { race, count: 1 });
                }
            }
        }
    }
}
