//! Kernel launches, host functions and stream callbacks. A launch's accesses come from its
//! parameters ([`super::kernels`]) or its measured or learnt footprint ([`footprint`]); a host
//! function runs through a trampoline that orders the host after its place in its stream.

use core::ffi::{c_uint, c_void};
use std::cell::RefCell;
use std::sync::Arc;

use streamsan::model::definition::HostCallback;
use streamsan::model::footprint::learnt::Learning;
use streamsan::model::op::{Access, HostEffect, KernelId, StackId};
use streamsan::model::streams::StreamRef;
use streamsan::model::Work;
use streamsan::phases::{self, Phase, Tally};
use streamsan_driver_api::*;

use super::batch;
use super::call::{handle_of, ok, origin, origin_with, stream};
use super::model::{model, unsettled};
use super::{footprint, host_reach, kernels, programmatic};
use crate::host_races;
use crate::intercept::experiments::{leaves_out, FORWARD_LAUNCHES, NO_CAPTURE, NO_QUEUE, NO_SCAN};
use crate::intercept::variants::{real, Call};

/// What a thread reuses from launch to launch, so that launches neither allocate nor take
/// shared locks: the list of accesses, the kernels launched lately.
#[derive(Default)]
struct Launcher {
    accesses: Vec<Access>,
    /// The addresses its channel parameters hold ([`kernels::KernelInfo::channels`]), read
    /// with its parameters, before a learnt footprint replaces them.
    channels: Vec<u64>,
    kernels: kernels::Recent,
    /// The kernel of the launch being made.
    kernel: Option<KernelId>,
    /// Its kernel for learnt footprints, if it is to be measured (`footprint=learn`)...
    learn: Option<u64>,
    /// ...and its words and anchors ([`footprint::plan`]).
    words: Vec<u64>,
    anchors: Vec<Access>,
    /// Its parameters were read before the real call ([`plan`]).
    planned: bool,
}

thread_local! {
    static LAUNCHER: RefCell<Launcher> = RefCell::new(Launcher::default());
}

/// Runs `f` on the thread's launcher, or, once the thread's storage is gone (exit
/// handlers), on one shared by such threads: a launch's plan and its telling must meet the
/// same launcher.
fn with_launcher(f: impl FnOnce(&mut Launcher)) {
    static AFTER_EXIT: std::sync::Mutex<Option<Launcher>> = std::sync::Mutex::new(None);
    let mut f = Some(f);
    let done = LAUNCHER.try_with(|launcher| (f.take().expect("once"))(&mut launcher.borrow_mut()));
    if done.is_err() {
        if let Some(f) = f {
            f(AFTER_EXIT.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Launcher::default));
        }
    }
}

/// Before the real call: reads the launch's parameters into the thread's launcher and says
/// whether the footprint engine is to measure it. `shape`: grid and block dimensions.
/// Only `footprint=learn` reads them before the call: elsewhere they are read after it, as a
/// kernel's layout is best asked once the driver accepted (and loaded) it.
unsafe fn plan(f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void, shape: [c_uint; 6]) -> bool {
    if !footprint::reads_parameters_first() {
        return footprint::measures_every_launch();
    }
    let model = unsettled();
    let mut measure = false;
    with_launcher(|launcher| {
        let info = phases::time(Phase::KernelInfo, || launcher.kernels.info(model, f));
        launcher.accesses.clear();
        // SAFETY: the launch's own arguments, as the driver requires them.
        phases::time(Phase::ParamScan, || unsafe {
            kernels::accesses(model, info, params, extra, &mut launcher.accesses)
        });
        info.channels(&launcher.accesses, &mut launcher.channels);
        launcher.kernel = info.id;
        // SAFETY: likewise.
        let Launcher { accesses, words, anchors, .. } = launcher;
        launcher.learn = unsafe { footprint::plan(model, info, f, params, extra, shape, accesses, words, anchors) };
        launcher.planned = true;
        measure = launcher.learn.is_some();
    });
    measure
}

/// After a successful real call: tells the model of the kernel launched on `on`; `ticket`:
/// its footprint is being measured, and its check waits for it.
///
/// # Safety
/// `params` and `extra` are the launch's own arguments, which the driver accepted.
unsafe fn launched(
    call: &Call,
    on: StreamRef,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    ticket: Option<u64>,
) {
    let model = unsettled();
    with_launcher(|launcher| {
        let planned = std::mem::take(&mut launcher.planned);
        if leaves_out(NO_SCAN) {
            launcher.accesses.clear();
            launcher.channels.clear();
            launcher.kernel = None;
            launcher.learn = None;
        } else if !planned {
            let info = phases::time(Phase::KernelInfo, || launcher.kernels.info(model, f));
            launcher.accesses.clear();
            // SAFETY: the caller's promise.
            phases::time(Phase::ParamScan, || unsafe {
                kernels::accesses(model, info, params, extra, &mut launcher.accesses)
            });
            info.channels(&launcher.accesses, &mut launcher.channels);
            launcher.kernel = info.id;
            launcher.learn = None;
        }
        phases::tally(Tally::LaunchAccesses, launcher.accesses.len());
        let origin = if leaves_out(NO_CAPTURE) { origin_with(call, || StackId(0)) } else { origin(call) };
        let work = Work { origin, kernel: launcher.kernel, accesses: &launcher.accesses, host: HostEffect::None };
        match ticket {
            Some(ticket) => {
                batch::settle(model);
                let _timer = phases::start(Phase::Model);
                let learn = launcher.learn.map(|kernel| Learning {
                    kernel,
                    words: launcher.words.as_slice().into(),
                    anchors: launcher.anchors.as_slice().into(),
                });
                match model.launch_pending(on, work, ticket, learn) {
                    Some(epoch) => host_reach::issued(model, on, &work, epoch, &launcher.channels),
                    None => footprint::discard(ticket),
                }
            }
            None if leaves_out(NO_QUEUE) => {}
            None => host_reach::queue(model, on, work, Phase::Model, &launcher.channels),
        }
    });
}

pub unsafe fn launch_kernel(
    call: &Call,
    real: real::launch_kernel,
    f: CUfunction,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let driver = |f: CUfunction| {
        phases::time(Phase::LaunchDriver, || unsafe {
            real(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem_bytes, h_stream, kernel_params, extra)
        })
    };
    if leaves_out(FORWARD_LAUNCHES) {
        return driver(f);
    }
    let shape = [grid_x, grid_y, grid_z, block_x, block_y, block_z];
    let measure = unsafe { plan(f, kernel_params, extra, shape) };
    let on = handle_of(stream(call, h_stream)) as *mut c_void;
    let (status, ticket) = footprint::launch(f.cast(), on, shape, measure, |f| driver(f.cast()));
    if ok(status) {
        let on = stream(call, h_stream);
        programmatic::before_told(f, on, false);
        unsafe { launched(call, on, f, kernel_params, extra, ticket) };
    }
    status
}

/// `cuLaunchKernelEx`: the stream is in the configuration. A programmatic event or a
/// launch-completion event attribute is taken as an event recorded after the kernel (which
/// may hide a race, but never invents one); programmatic stream serialization is told to the
/// model before the launch ([`programmatic`]).
pub unsafe fn launch_kernel_ex(
    call: &Call,
    real: real::launch_kernel_ex,
    config: *const LaunchConfig,
    f: CUfunction,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let driver = |f: CUfunction| phases::time(Phase::LaunchDriver, || unsafe { real(config, f, kernel_params, extra) });
    if leaves_out(FORWARD_LAUNCHES) {
        return driver(f);
    }
    // SAFETY: null or the program's configuration.
    let shape = unsafe { config.as_ref() }.map_or([0; 6], |c| {
        [c.grid_dim[0], c.grid_dim[1], c.grid_dim[2], c.block_dim[0], c.block_dim[1], c.block_dim[2]]
    });
    let measure = unsafe { plan(f, kernel_params, extra, shape) };
    // SAFETY: likewise.
    let on = unsafe { config.as_ref() }.map_or(core::ptr::null_mut(), |c| c.stream);
    let on = handle_of(stream(call, on)) as *mut c_void;
    let (status, ticket) = footprint::launch(f.cast(), on, shape, measure, |f| driver(f.cast()));
    // SAFETY: the configuration the driver accepted.
    if ok(status) {
        if let Some(config) = unsafe { config.as_ref() } {
            let on = stream(call, config.stream);
            // SAFETY: `num_attrs` attributes.
            let attrs = (0..config.num_attrs as usize).map(|i| unsafe { &*config.attrs.add(i) });
            let asked = attrs
                .clone()
                .any(|a| a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION && a.value[0] as u32 != 0);
            programmatic::before_told(f, on, asked);
            unsafe { launched(call, on, f, kernel_params, extra, ticket) };
            for attr in attrs {
                if let CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT | CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT = attr.id {
                    batch::record(unsettled(), attr.value[0], on, false, origin(call));
                }
            }
        }
    }
    status
}

pub unsafe fn launch_cooperative_kernel(
    call: &Call,
    real: real::launch_cooperative_kernel,
    f: CUfunction,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
) -> CUresult {
    let driver = |f: CUfunction| {
        phases::time(Phase::LaunchDriver, || unsafe {
            real(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem_bytes, h_stream, kernel_params)
        })
    };
    if leaves_out(FORWARD_LAUNCHES) {
        return driver(f);
    }
    let shape = [grid_x, grid_y, grid_z, block_x, block_y, block_z];
    let measure = unsafe { plan(f, kernel_params, core::ptr::null_mut(), shape) };
    let on = handle_of(stream(call, h_stream)) as *mut c_void;
    let (status, ticket) = footprint::launch(f.cast(), on, shape, measure, |f| driver(f.cast()));
    if ok(status) {
        let on = stream(call, h_stream);
        programmatic::before_told(f, on, false);
        unsafe { launched(call, on, f, kernel_params, core::ptr::null_mut(), ticket) };
    }
    status
}

/// What the trampoline needs to run the program's host function.
struct HostFunc {
    func: unsafe extern "C" fn(*mut c_void),
    user_data: *mut c_void,
    callback: Arc<HostCallback>,
}

/// Runs the program's host function on the driver's thread. The function may end that thread
/// with a forced unwind (CPython's `pthread_exit` of a thread that takes the GIL while the
/// interpreter finalizes), which passes through this frame as through the driver's alone
/// only while nothing here has a destructor to run (the test
/// `a_host_function_that_ends_its_thread_ends_it_as_without_streamsan`).
unsafe extern "C" fn run_host_func(data: *mut c_void) {
    // SAFETY: `data` is the HostFunc boxed by launch_host_func.
    let host_func = unsafe { &*(data as *const HostFunc) };
    model().host_func_ran(&host_func.callback);
    host_races::after_call(false);
    unsafe { (host_func.func)(host_func.user_data) };
    // A captured function runs at every launch of its graph: keep it.
    if !host_func.callback.captured() {
        drop(unsafe { Box::from_raw(data as *mut HostFunc) });
    }
}

pub unsafe fn launch_host_func(
    call: &Call,
    real: real::launch_host_func,
    h_stream: CUstream,
    func: CUhostFn,
    user_data: *mut c_void,
) -> CUresult {
    let Some(func) = func else {
        return unsafe { real(h_stream, None, user_data) };
    };
    // Before the call: the driver may run the function before the call returns.
    let callback = model().host_func(stream(call, h_stream), &origin(call));
    let wrapped = Box::into_raw(Box::new(HostFunc { func, user_data, callback }));
    let status = unsafe { real(h_stream, Some(run_host_func), wrapped.cast()) };
    if !ok(status) {
        drop(unsafe { Box::from_raw(wrapped) });
    }
    status
}

/// What the trampoline needs to run the program's stream callback.
struct StreamCallback {
    callback: unsafe extern "C" fn(CUstream, CUresult, *mut c_void),
    user_data: *mut c_void,
    ordering: Arc<HostCallback>,
}

/// Runs the program's stream callback, as [`run_host_func`] its host function: the box is
/// freed before the call.
unsafe extern "C" fn run_stream_callback(stream: CUstream, status: CUresult, data: *mut c_void) {
    // SAFETY: `data` is the StreamCallback boxed by stream_add_callback.
    let wrapped = unsafe { Box::from_raw(data as *mut StreamCallback) };
    model().host_func_ran(&wrapped.ordering);
    host_races::after_call(false);
    let (callback, user_data) = (wrapped.callback, wrapped.user_data);
    drop(wrapped);
    unsafe { callback(stream, status, user_data) };
}

pub unsafe fn stream_add_callback(
    call: &Call,
    real: real::stream_add_callback,
    h_stream: CUstream,
    callback: CUstreamCallback,
    user_data: *mut c_void,
    flags: c_uint,
) -> CUresult {
    let Some(callback) = callback else {
        return unsafe { real(h_stream, None, user_data, flags) };
    };
    let ordering = model().host_func(stream(call, h_stream), &origin(call));
    let wrapped = Box::into_raw(Box::new(StreamCallback { callback, user_data, ordering }));
    let status = unsafe { real(h_stream, Some(run_stream_callback), wrapped.cast(), flags) };
    if !ok(status) {
        drop(unsafe { Box::from_raw(wrapped) });
    }
    status
}

#[cfg(all(test, feature = "experiments"))]
mod tests {
    use super::*;
    use crate::intercept::experiments::{streamsan_experiment, SERIAL};
    use crate::intercept::variants::Variant;

    unsafe extern "C" fn accepting_driver(
        _: *const LaunchConfig,
        _: CUfunction,
        _: *mut *mut c_void,
        _: *mut *mut c_void,
    ) -> CUresult {
        CUDA_SUCCESS
    }

    /// A launch the program left out reaches the driver and nothing else; one not queued
    /// leaves the batch as it was; with nothing left out, it waits in the batch.
    #[test]
    fn a_launch_left_out_reaches_the_driver_and_not_the_batch() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let _batch = batch::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let call = Call { variant: Variant::cuLaunchKernelEx };
        let null = core::ptr::null_mut();
        let config = LaunchConfig {
            grid_dim: [1; 3],
            block_dim: [1; 3],
            shared_mem_bytes: 0,
            stream: null,
            attrs: core::ptr::null_mut(),
            num_attrs: 0,
        };
        // SAFETY: a stand-in for the driver's function, which reads none of its arguments.
        let launch = || unsafe { launch_kernel_ex(&call, accepting_driver, &config, null, null.cast(), null.cast()) };
        batch::settle(unsettled());
        for (parts, queued) in [(FORWARD_LAUNCHES, false), (NO_QUEUE, false), (NO_CAPTURE | NO_SCAN, true), (0, true)] {
            streamsan_experiment(parts);
            assert_eq!(launch(), CUDA_SUCCESS);
            assert_eq!(batch::waiting(), queued, "parts left out: {parts}");
            batch::settle(unsettled());
        }
    }
}
