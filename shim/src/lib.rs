//! The streamsan shim: a library preloaded into an unmodified CUDA program.
//!
//! Programs reach `libcuda.so.1` by three roads, and the shim stands on all of them:
//!
//! 1. **Linking.** [`exports`] exports every hooked driver name (`cuLaunchKernel`,
//!    `cuLaunchKernel_ptsz`, `cuMemcpyHtoD_v2_ptds`, ...), so a program linked with `-lcuda`
//!    binds to the shim first.
//! 2. **`dlopen` + `dlsym`.** [`dlsym`] interposes `dlsym` itself and answers hooked names
//!    with their hooks, whatever handle they were looked up in.
//! 3. **`cuGetProcAddress`.** [`getproc`] lets the real driver choose the variant for a
//!    (symbol, version, flags) request and returns the hook of exactly that variant.
//!
//! Every hook calls the real function ([`driver`]) exactly once with the caller's
//! arguments and returns its status unchanged; the handlers in [`hooks`] tell the model
//! what the call meant. [`annotate`] lets a program declare memory the driver does not see
//! allocated (a framework's own sub-allocations); [`query`] lets it ask for its report so far.
//! [`runtime`] holds the process-wide state and writes the report, [`signals`] makes sure a
//! dying process writes it too. [`host_guard`] catches the host touching the pinned memory of
//! a copy in flight (host races).

// The hooks are generated from the driver's table and keep its C signatures (up to 13
// arguments); their one safety contract, the caller's, is stated once in `hooks`.
#![allow(clippy::too_many_arguments, clippy::missing_safety_doc)]

pub mod annotate;
pub mod diag;
pub mod dlsym;
pub mod driver;
pub mod exports;
pub mod getproc;
pub mod hooks;
pub mod host_guard;
pub mod kernels;
pub mod python;
pub mod query;
pub mod runtime;
pub mod signals;
pub mod stack;
pub mod stats;
pub mod thread;
