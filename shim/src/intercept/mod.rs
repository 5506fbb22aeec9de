//! How calls reach the shim: the bottom layer, which knows names and addresses, not what a
//! call means.
//!
//! Programs reach `libcuda.so.1` by three roads, and the shim stands on all of them:
//!
//! 1. **Linking.** Every hooked driver name (`cuLaunchKernel`, `cuLaunchKernel_ptsz`,
//!    `cuMemcpyHtoD_v2_ptds`, ...) is exported in the shape of [`exports`], so a program
//!    linked with `-lcuda` binds to the shim first.
//! 2. **`dlopen` + `dlsym`.** [`dlsym`] interposes `dlsym` itself and answers hooked names
//!    with their hooks, whatever handle they were looked up in.
//! 3. **`cuGetProcAddress`.** [`getproc`] lets the real driver choose the variant for a
//!    (symbol, version, flags) request and returns the hook of exactly that variant.
//!
//! NCCL's collectives arrive by the first two roads too: [`nccl`] is their table, their
//! hooks' shape and the real NCCL.
//!
//! [`variants`] is the table of names all of them read; [`driver`] finds the real driver's
//! functions; [`stats`] counts the calls; [`first_call`] notes that the process uses the
//! driver; [`options`] and [`diag`] are what the user asked for and what streamsan tells
//! them; [`experiments`] the parts of the shim a program measuring it leaves out. Nothing
//! here imports a layer above.

pub mod diag;
pub mod dlsym;
pub mod driver;
pub mod experiments;
pub mod exports;
pub mod first_call;
pub mod getproc;
pub mod nccl;
pub mod options;
pub mod stats;
pub mod variants;
