//! streamsan: a race-detecting stream-order sanitizer for CUDA.
//!
//! This crate holds everything that is not FFI: the options, the report document, the
//! `streamsan` command line and the launcher it shares with the test harness. The shim
//! (`shim/`, a preloaded cdylib) intercepts the driver and feeds what it sees to the model
//! here.

pub mod hash;
pub mod launch;
pub mod model;
pub mod options;
pub mod recent;
pub mod suppressions;
pub mod report;
