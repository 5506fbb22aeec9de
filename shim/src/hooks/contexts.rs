//! Contexts: synchronization of a whole context, destruction and reset.

use std::collections::HashMap;
use std::sync::Mutex;

use streamsan_driver_api::*;

use super::batch::{self, Join};
use super::call::ok;
use super::kernels;
use super::model::{model, unsettled};
use crate::intercept::driver;
use crate::intercept::variants::{real, Call};

/// Primary contexts by device, for `cuDevicePrimaryCtxReset`, which names only the device.
static PRIMARY: Mutex<Option<HashMap<CUdevice, u64>>> = Mutex::new(None);

pub unsafe fn ctx_destroy(_call: &Call, real: real::ctx_destroy, ctx: CUcontext) -> CUresult {
    let status = unsafe { real(ctx) };
    if ok(status) {
        model().context_destroyed(ctx as u64);
        kernels::code_unloaded(None);
    }
    status
}

/// `cuCtxSynchronize`: the host waits for every stream of the current context (its join
/// queued in the model's batch after the work it waited for, as at a stream's synchronize).
pub unsafe fn ctx_synchronize(_call: &Call, real: real::ctx_synchronize) -> CUresult {
    let status = unsafe { real() };
    if ok(status) {
        super::load_gate::synchronized(None);
        batch::join(unsettled(), Join::Context(driver::current_context()));
        super::footprint::collect();
    }
    status
}

/// `cuCtxSynchronize_v2(ctx)` (CUDA 13): the named context, or the current one.
pub unsafe fn ctx_synchronize_v2(_call: &Call, real: real::ctx_synchronize_v2, ctx: CUcontext) -> CUresult {
    let status = unsafe { real(ctx) };
    if ok(status) {
        super::load_gate::synchronized(None);
        let ctx = if ctx.is_null() { driver::current_context() } else { ctx as u64 };
        batch::join(unsettled(), Join::Context(ctx));
        super::footprint::collect();
    }
    status
}

pub unsafe fn primary_ctx_retain(
    _call: &Call,
    real: real::primary_ctx_retain,
    pctx: *mut CUcontext,
    dev: CUdevice,
) -> CUresult {
    let status = unsafe { real(pctx, dev) };
    if ok(status) && !pctx.is_null() {
        let ctx = unsafe { *pctx } as u64;
        PRIMARY.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(dev, ctx);
    }
    status
}

/// `cuDevicePrimaryCtxReset`: the device's primary context loses its streams and memory.
pub unsafe fn primary_ctx_reset(_call: &Call, real: real::primary_ctx_reset, dev: CUdevice) -> CUresult {
    let status = unsafe { real(dev) };
    if ok(status) {
        let ctx = PRIMARY.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&dev).copied());
        if let Some(ctx) = ctx {
            model().context_destroyed(ctx);
        }
        kernels::code_unloaded(None);
    }
    status
}
