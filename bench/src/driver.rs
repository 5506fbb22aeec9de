//! The driver functions the workloads call, and NCCL's, looked up by name with `dlopen` and
//! `dlsym`, the road cudart and the frameworks take: under the shim, `dlsym` answers with
//! its hooks.

use core::ffi::CStr;

use libloading::Library;
use streamsan_driver_api::*;

/// A library's functions, looked up by name when it is loaded: `$library` answers with
/// `$result` from each.
macro_rules! functions {
    ($(#[$doc:meta])* $library_type:ident = $library:literal -> $result:ty { $( $field:ident = $name:literal : fn($($arg:ty),*) ; )* }) => {
        $(#[$doc])*
        pub struct $library_type {
            _library: Library,
            $( pub $field: unsafe extern "C" fn($($arg),*) -> $result, )*
        }

        impl $library_type {
            /// Loads the library (found on the library path).
            pub fn load() -> $library_type {
                // SAFETY: loading the library runs its initializers, as any program using it does.
                let library = unsafe { Library::new($library) }.expect(concat!("load ", $library));
                // SAFETY: each symbol has the library's signature for its name.
                unsafe {
                    $library_type {
                        $( $field: *library.get(concat!($name, "\0").as_bytes()).expect($name), )*
                        _library: library,
                    }
                }
            }
        }
    };
}

functions! {
    /// The driver's entry points.
    Driver = "libcuda.so.1" -> CUresult {
        init = "cuInit": fn(c_uint);
        device_get = "cuDeviceGet": fn(*mut CUdevice, c_int);
        primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CUcontext, CUdevice);
        ctx_set_current = "cuCtxSetCurrent": fn(CUcontext);
        ctx_synchronize = "cuCtxSynchronize": fn();
        stream_create = "cuStreamCreate": fn(*mut CUstream, c_uint);
        stream_wait_event = "cuStreamWaitEvent": fn(CUstream, CUevent, c_uint);
        event_create = "cuEventCreate": fn(*mut CUevent, c_uint);
        event_record = "cuEventRecord": fn(CUevent, CUstream);
        mem_alloc = "cuMemAlloc_v2": fn(*mut CUdeviceptr, usize);
        mem_alloc_async = "cuMemAllocAsync": fn(*mut CUdeviceptr, usize, CUstream);
        mem_free_async = "cuMemFreeAsync": fn(CUdeviceptr, CUstream);
        mem_alloc_host = "cuMemAllocHost_v2": fn(*mut *mut c_void, usize);
        memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(CUdeviceptr, *const c_void, usize, CUstream);
        memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2": fn(*mut c_void, CUdeviceptr, usize, CUstream);
        stream_synchronize = "cuStreamSynchronize": fn(CUstream);
        module_load_data = "cuModuleLoadData": fn(*mut CUmodule, *const c_void);
        module_get_function = "cuModuleGetFunction": fn(*mut CUfunction, CUmodule, *const c_char);
        launch_kernel = "cuLaunchKernel": fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void);
        launch_kernel_ex = "cuLaunchKernelEx": fn(*const LaunchConfig, CUfunction, *mut *mut c_void, *mut *mut c_void);
        mem_free = "cuMemFree_v2": fn(CUdeviceptr);
        stream_destroy = "cuStreamDestroy_v2": fn(CUstream);
        memset_d8_async = "cuMemsetD8Async": fn(CUdeviceptr, c_uchar, usize, CUstream);
        memcpy_dtod_async = "cuMemcpyDtoDAsync_v2": fn(CUdeviceptr, CUdeviceptr, usize, CUstream);
        stream_begin_capture = "cuStreamBeginCapture_v2": fn(CUstream, u32);
        stream_end_capture = "cuStreamEndCapture": fn(CUstream, *mut CUgraph);
        graph_instantiate = "cuGraphInstantiateWithFlags": fn(*mut CUgraphExec, CUgraph, u64);
        graph_launch = "cuGraphLaunch": fn(CUgraphExec, CUstream);
        graph_exec_destroy = "cuGraphExecDestroy": fn(CUgraphExec);
        graph_destroy = "cuGraphDestroy": fn(CUgraph);
    }
}

functions! {
    /// The NCCL functions a data-parallel step calls (the bench links the stand-in's
    /// `libnccl.so.2` beside the driver).
    Nccl = "libnccl.so.2" -> NcclResult {
        comm_init_all = "ncclCommInitAll": fn(*mut NcclComm, c_int, *const c_int);
        all_reduce = "ncclAllReduce": fn(*const c_void, *mut c_void, usize, c_int, c_int, NcclComm, CUstream);
    }
}

/// `ncclFloat32` and `ncclSum`.
pub const NCCL_FLOAT32: c_int = 7;
pub const NCCL_SUM: c_int = 0;

impl Nccl {
    /// A communicator of one rank, on device 0.
    pub fn communicator(&self) -> NcclComm {
        let mut comm: NcclComm = core::ptr::null_mut();
        // SAFETY: an array of one communicator; no device list (devices 0..1).
        let status = unsafe { (self.comm_init_all)(&mut comm, 1, core::ptr::null()) };
        assert_eq!(status, NCCL_SUCCESS, "ncclCommInitAll failed");
        comm
    }
}

/// Panics with the call's name unless it succeeded: a workload measures working calls only.
pub fn check(status: CUresult, what: &str) {
    assert_eq!(status, CUDA_SUCCESS, "{what} failed");
}

/// A kernel with four pointer parameters, `quad(float*, const float*, const float*, float*)`.
const QUAD_PTX: &str = concat!(
    ".version 7.0\n.target sm_52\n.address_size 64\n",
    ".visible .entry _Z4quadPfPKfS1_S_(\n",
    "  .param .u64 p0,\n  .param .u64 p1,\n  .param .u64 p2,\n  .param .u64 p3\n",
    ")\n{\n ret;\n}\n\0"
);

/// PyTorch's vectorized elementwise kernel for `tensor * scalar`, as its library declares it:
/// `(int n, AUnaryFunctor<float, float, float, MulFunctor<float>>, std::array<char*, 2>)`.
/// Its pointers sit inside a by-value array, so their direction is not in the name.
pub const ELEMENTWISE_NAME: &CStr = c"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_";
const ELEMENTWISE_PTX: &str = concat!(
    ".version 7.0\n.target sm_52\n.address_size 64\n",
    ".visible .entry _ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13AUnaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_(\n",
    "  .param .u32 p0,\n  .param .align 4 .b8 p1[4],\n  .param .align 8 .b8 p2[16]\n",
    ")\n{\n ret;\n}\n\0"
);

/// A context made current on device 0, the four-pointer kernel and the elementwise one.
pub struct Setup {
    pub context: CUcontext,
    pub quad: CUfunction,
    pub elementwise: CUfunction,
}

impl Driver {
    pub fn setup(&self) -> Setup {
        let (mut device, mut context, mut quad, mut elementwise) =
            (0, core::ptr::null_mut(), core::ptr::null_mut(), core::ptr::null_mut());
        let (mut module, mut torch) = (core::ptr::null_mut(), core::ptr::null_mut());
        // SAFETY: out-pointers to locals; a NUL-terminated PTX image and kernel name.
        unsafe {
            check((self.init)(0), "cuInit");
            check((self.device_get)(&mut device, 0), "cuDeviceGet");
            check((self.primary_ctx_retain)(&mut context, device), "cuDevicePrimaryCtxRetain");
            check((self.ctx_set_current)(context), "cuCtxSetCurrent");
            check((self.module_load_data)(&mut module, QUAD_PTX.as_ptr().cast()), "cuModuleLoadData");
            check((self.module_get_function)(&mut quad, module, c"_Z4quadPfPKfS1_S_".as_ptr()), "cuModuleGetFunction");
            check((self.module_load_data)(&mut torch, ELEMENTWISE_PTX.as_ptr().cast()), "cuModuleLoadData");
            check(
                (self.module_get_function)(&mut elementwise, torch, ELEMENTWISE_NAME.as_ptr()),
                "cuModuleGetFunction",
            );
        }
        Setup { context, quad, elementwise }
    }

    pub fn stream(&self) -> CUstream {
        let mut stream = core::ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check(unsafe { (self.stream_create)(&mut stream, CU_STREAM_NON_BLOCKING) }, "cuStreamCreate");
        stream
    }

    pub fn buffer(&self, bytes: usize) -> CUdeviceptr {
        let mut ptr = 0;
        // SAFETY: an out-pointer to a local.
        check(unsafe { (self.mem_alloc)(&mut ptr, bytes) }, "cuMemAlloc");
        ptr
    }

    /// The kernel `name` of a PTX image (NUL-terminated), loaded as a module of its own.
    pub fn kernel(&self, ptx: &str, name: &CStr) -> CUfunction {
        assert!(ptx.ends_with('\0'), "a NUL-terminated image");
        let (mut module, mut function) = (core::ptr::null_mut(), core::ptr::null_mut());
        // SAFETY: out-pointers to locals; a NUL-terminated image and kernel name.
        unsafe {
            check((self.module_load_data)(&mut module, ptx.as_ptr().cast()), "cuModuleLoadData");
            check((self.module_get_function)(&mut function, module, name.as_ptr()), "cuModuleGetFunction");
        }
        function
    }

    /// Launches `f` on `stream` with one pointer per parameter (each parameter a `.u64`, at
    /// most 64 of them).
    ///
    /// # Safety
    /// `f` takes `pointers.len()` 8-byte parameters and `stream` is live.
    pub unsafe fn launch_pointers(&self, f: CUfunction, stream: CUstream, pointers: &mut [CUdeviceptr]) -> CUresult {
        let mut params = [core::ptr::null_mut::<c_void>(); 64];
        for (param, pointer) in params.iter_mut().zip(pointers.iter_mut()) {
            *param = (pointer as *mut u64).cast();
        }
        // SAFETY: one parameter pointer per parameter.
        unsafe { (self.launch_kernel)(f, 1, 1, 1, 128, 1, 1, 0, stream, params.as_mut_ptr(), core::ptr::null_mut()) }
    }

    pub fn event(&self) -> CUevent {
        let mut event = core::ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check(unsafe { (self.event_create)(&mut event, 0) }, "cuEventCreate");
        event
    }

    /// Launches `quad` on `stream` with the four pointers.
    ///
    /// # Safety
    /// `quad` is the setup's kernel and `stream` a live stream.
    #[inline]
    pub unsafe fn launch(&self, quad: CUfunction, stream: CUstream, pointers: &mut [CUdeviceptr; 4]) -> CUresult {
        let [a, b, c, d] = pointers;
        let mut params: [*mut c_void; 4] =
            [(a as *mut u64).cast(), (b as *mut u64).cast(), (c as *mut u64).cast(), (d as *mut u64).cast()];
        // SAFETY: four parameter pointers for a four-parameter kernel.
        unsafe { (self.launch_kernel)(quad, 1, 1, 1, 128, 1, 1, 0, stream, params.as_mut_ptr(), core::ptr::null_mut()) }
    }

    /// Launches the elementwise kernel on `stream`: `n` floats of `input` scaled into `output`.
    ///
    /// # Safety
    /// `elementwise` is the setup's kernel and `stream` a live stream.
    #[inline]
    pub unsafe fn launch_elementwise(
        &self,
        elementwise: CUfunction,
        stream: CUstream,
        n: i32,
        output: CUdeviceptr,
        input: CUdeviceptr,
    ) -> CUresult {
        let (mut n, mut scalar, mut data) = (n, 1.0001f32, [output, input]);
        let mut params: [*mut c_void; 3] =
            [(&mut n as *mut i32).cast(), (&mut scalar as *mut f32).cast(), data.as_mut_ptr().cast()];
        // SAFETY: three parameter pointers for a three-parameter kernel.
        unsafe {
            (self.launch_kernel)(elementwise, 1, 1, 1, 128, 1, 1, 0, stream, params.as_mut_ptr(), core::ptr::null_mut())
        }
    }
}
