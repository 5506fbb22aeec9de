//! streamsan: a race-detecting stream-order sanitizer for CUDA.
//!
//! This crate holds everything that is not the shim's FFI: the happens-before [`model`],
//! the [`report`] document (built, rendered, merged, written; its suppressions, and the
//! sink that decides what becomes of each race), the [`options`], the `streamsan` command
//! line and the [`cli`] start-up it shares with the test `harness` (behind the cargo
//! feature `harness`, on by default and off for the shim, which has no use for it). The
//! shim (`shim/`, a preloaded cdylib) intercepts the driver and feeds what it sees to the
//! model here; [`hash`], [`hot_section`] and [`thread_cache`] keep that fast.

#[macro_use]
mod named_enum;

pub mod cli;
#[cfg(feature = "harness")]
pub mod harness;
pub mod hash;
pub mod hot_section;
pub mod model;
pub mod options;
pub mod phases;
pub mod report;
pub mod thread_cache;
