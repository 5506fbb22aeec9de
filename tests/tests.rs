//! The integration tests, one module per concern, in one binary: the shim, the stand-ins and
//! the C programs they run are built once for all of them (`common`).

mod common;

mod call_sites;
mod cli;
mod faults;
mod footprint;
mod harness;
mod host_races;
mod interposition;
mod ipc;
mod kernels;
mod lifecycle;
mod model_properties;
mod nccl;
mod report_command;
mod report_formats;
mod reports;
mod semantics;
mod stress;
mod suppressions;
mod test_api;
