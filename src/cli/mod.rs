//! What only the command line and the test harness use: starting a program under the shim.

pub mod signals;
pub mod start;
