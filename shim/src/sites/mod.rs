//! Call sites: who made a call, and from where. The second layer, between
//! [`crate::intercept`] and the handlers, which stamp every operation with a [`thread`] and a
//! call site ([`stack`], with a Python program's frames from [`python`] and the [`test`]
//! running), resolved only for a report.

mod chain_cache;
pub mod objects;
pub mod python;
pub mod stack;
pub mod test;
pub mod thread;
