//! Call sites: who made a call, and from where. The second layer: it stands on
//! [`crate::intercept`] (the real driver, for CPython's functions; diagnostics) and serves
//! the handlers, which stamp every operation with a thread and a call site, and the
//! reports, which resolve them.
//!
//! [`thread`] numbers the host threads; [`stack`] captures native stacks cheaply and
//! resolves them only for a report, reading a chain it unwound before from the stack
//! ([`chain_cache`]); [`python`] adds a Python program's own frames;
//! [`objects`] says which loaded object holds an address, for both.

mod chain_cache;
pub mod objects;
pub mod python;
pub mod stack;
pub mod thread;
