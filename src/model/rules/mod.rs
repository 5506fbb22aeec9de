//! The rules of the model, one concern per file, in the way ThreadSanitizer's runtime splits
//! `tsan_rtl_access`, `tsan_rtl_mutex`, `tsan_rtl_thread`. Each file adds to `impl Model`
//! the entry points of one rule (and the steps only it uses); [`issue`] is the step every
//! other rule goes through. `docs/semantics.md` states each rule in words.

pub mod built;
mod footprint_late;
mod footprint_learning;
mod graph_footprints;
pub mod graphs;
mod ipc;
pub mod issue;
pub mod lifetime;
pub mod memory;
pub mod sync;
pub mod work;
