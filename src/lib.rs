//! streamsan: a race-detecting stream-order sanitizer for CUDA.
//!
//! Everything but the shim's FFI: the happens-before [`model`], the [`report`] (built,
//! rendered, merged, written, suppressed), the [`options`], the command line's [`cli`] and
//! the test `harness` (cargo feature `harness`, off for the shim). [`hash`], [`hot_section`]
//! and [`thread_cache`] keep the shim's launch path fast; [`phases`] times it.

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
