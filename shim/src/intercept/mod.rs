//! How calls reach the shim: the bottom layer, which knows names and addresses, not what a
//! call means. Programs reach `libcuda.so.1` (and NCCL, [`nccl`]) by three roads, and the
//! shim stands on all of them:
//!
//! 1. **Linking.** Every hooked name is exported in the shape of [`exports`].
//! 2. **`dlopen` + `dlsym`.** [`dlsym`] answers hooked names with their hooks.
//! 3. **`cuGetProcAddress`.** [`getproc`] returns the hook of the variant the driver chose.
//!
//! [`variants`] is the table of names they read; [`driver`] finds the real functions.

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
