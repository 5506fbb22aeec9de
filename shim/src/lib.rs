//! The streamsan shim: a library preloaded into an unmodified CUDA program, in five layers
//! that only point down.
//!
//! 1. [`intercept`]: how calls reach the shim: the table of exported driver names, the
//!    real driver, `dlsym` and `cuGetProcAddress` answered with hooks, calls counted.
//! 2. [`sites`]: who made a call and from where: host threads, native and Python stacks.
//! 3. [`host_races`]: the host's own loads and stores to the pinned memory of copies in
//!    flight, seen through page protection and a SIGSEGV handler.
//! 4. [`hooks`]: what calls mean: the exported hooks and their handlers, one file per API
//!    family, which call the real driver once and tell the process's model what happened
//!    (and the guard what copies are in flight).
//! 5. [`life`]: the process's life: load, first call, fork, exit and signals, and the
//!    report sink (`streamsan::report::sink`) installed with what only the shim knows.
//!
//! Where a lower layer needs something of a higher one, the higher installs it at load: the
//! process life tells [`intercept::first_call`] what a first driver call starts, gives
//! [`hooks::model`] the sink its races go to, and gives [`host_races`] the model.

// The hooks are generated from the driver's table and keep its C signatures (up to 13
// arguments); their one safety contract, the caller's, is stated once in `hooks`.
#![allow(clippy::too_many_arguments, clippy::missing_safety_doc)]

pub mod hooks;
pub mod host_races;
pub mod intercept;
pub mod life;
pub mod sites;
