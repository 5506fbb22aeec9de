//! The CUDA driver functions that streamsan interposes, described once: [`driver_api!`] hands
//! a table with one entry per API family (its exported symbols and C signature) to a macro of
//! the caller's choosing, so the shim, the stand-in driver and the fidelity test never
//! disagree on a name or an argument. Types are raw (`u32` for every status and enum), so an
//! unknown value passes through untouched.

#![allow(non_camel_case_types)]

pub mod nccl;
pub use nccl::{datatype_size, NcclComm, NcclResult, NCCL_INVALID_ARGUMENT, NCCL_IN_PROGRESS, NCCL_SUCCESS};

/// The C types the table is written in; a consumer does `use streamsan_driver_api::*`.
pub use core::ffi::{c_char, c_int, c_uchar, c_uint, c_ushort, c_void};

/// A driver status code, kept raw so that any value passes through.
pub type CUresult = u32;
pub type CUdeviceptr = u64;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUkernel = *mut c_void;
pub type CUlibrary = *mut c_void;
pub type CUgraph = *mut c_void;
pub type CUgraphExec = *mut c_void;
pub type CUgraphNode = *mut c_void;
pub type CUarray = *mut c_void;
pub type CUmipmappedArray = *mut c_void;
pub type CUmemoryPool = *mut c_void;
pub type CUmemGenericAllocationHandle = u64;
pub type CUexternalSemaphore = *mut c_void;
pub type CUhostFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
pub type CUstreamCallback = Option<unsafe extern "C" fn(stream: CUstream, status: CUresult, user_data: *mut c_void)>;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;

/// Stream handles with a meaning of their own (cuda.h).
pub const CU_STREAM_LEGACY: usize = 0x1;
pub const CU_STREAM_PER_THREAD: usize = 0x2;
/// `cuStreamCreate` flag: the stream does not synchronize with the legacy default stream.
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
/// `cuGetProcAddress` flags.
pub const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 0x2;
/// `cuGetProcAddress_v2` symbol status.
pub const CU_GET_PROC_ADDRESS_SUCCESS: u32 = 0;
pub const CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: u32 = 1;
pub const CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: u32 = 2;
/// `cuEventRecordWithFlags` flag: record a node that other graphs and streams can see.
pub const CU_EVENT_RECORD_EXTERNAL: c_uint = 0x1;
/// `CUmemorytype` values.
pub const CU_MEMORYTYPE_HOST: u32 = 1;
pub const CU_MEMORYTYPE_DEVICE: u32 = 2;
pub const CU_MEMORYTYPE_ARRAY: u32 = 3;
pub const CU_MEMORYTYPE_UNIFIED: u32 = 4;
/// `kernel extra` markers.
pub const CU_LAUNCH_PARAM_END: usize = 0x0;
pub const CU_LAUNCH_PARAM_BUFFER_POINTER: usize = 0x1;
pub const CU_LAUNCH_PARAM_BUFFER_SIZE: usize = 0x2;
/// `CUlaunchAttributeID` values that bear on ordering.
pub const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;
pub const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: u32 = 7;
pub const CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: u32 = 12;
/// `CUgraphNodeType` of a kernel node (`GraphNodeParams::type_`).
pub const CU_GRAPH_NODE_TYPE_KERNEL: u32 = 0;
/// `CUgraphDependencyType` values (`GraphEdgeData::type_`).
pub const CU_GRAPH_DEPENDENCY_TYPE_DEFAULT: c_uchar = 0;
pub const CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC: c_uchar = 1;
/// A kernel node's outgoing ports (`GraphEdgeData::from_port`).
pub const CU_GRAPH_KERNEL_NODE_PORT_DEFAULT: c_uchar = 0;
pub const CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC: c_uchar = 1;
pub const CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER: c_uchar = 2;
/// `CUstreamBatchMemOpType` values.
pub const CU_STREAM_MEM_OP_WAIT_VALUE_32: u32 = 1;
pub const CU_STREAM_MEM_OP_WRITE_VALUE_32: u32 = 2;
pub const CU_STREAM_MEM_OP_WAIT_VALUE_64: u32 = 4;
pub const CU_STREAM_MEM_OP_WRITE_VALUE_64: u32 = 5;

/// `CUDA_MEMCPY2D`, enums raw.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memcpy2D {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_memory_type: u32,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: CUarray,
    pub src_pitch: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_memory_type: u32,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: CUarray,
    pub dst_pitch: usize,
    pub width_in_bytes: usize,
    pub height: usize,
}

/// `CUDA_MEMCPY3D`, enums raw.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memcpy3D {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_memory_type: u32,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: CUarray,
    pub reserved0: *mut c_void,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_memory_type: u32,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: CUarray,
    pub reserved1: *mut c_void,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width_in_bytes: usize,
    pub height: usize,
    pub depth: usize,
}

/// `CUDA_MEMCPY3D_PEER`, enums raw.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memcpy3DPeer {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_memory_type: u32,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: CUarray,
    pub src_context: CUcontext,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_memory_type: u32,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: CUarray,
    pub dst_context: CUcontext,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width_in_bytes: usize,
    pub height: usize,
    pub depth: usize,
}

/// `CUDA_ARRAY_DESCRIPTOR`, the format raw: `width` x `height` elements (height 0: a 1D
/// array).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ArrayDescriptor {
    pub width: usize,
    pub height: usize,
    pub format: u32,
    pub num_channels: c_uint,
}

/// `CUDA_ARRAY3D_DESCRIPTOR`, the format raw: `width` x `height` x `depth` elements (a zero
/// height or depth: fewer dimensions; a layered or cubemap array's layers are its depth).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Array3DDescriptor {
    pub width: usize,
    pub height: usize,
    pub depth: usize,
    pub format: u32,
    pub num_channels: c_uint,
    pub flags: c_uint,
}

/// `CUDA_ARRAY3D_DESCRIPTOR` flags whose arrays' depth counts layers (which a mipmap's
/// levels keep), not a third dimension (which they halve).
pub const CUDA_ARRAY3D_LAYERED: c_uint = 0x01;
pub const CUDA_ARRAY3D_CUBEMAP: c_uint = 0x04;

/// The size in bytes of one element of an array of `CUarray_format` value `format` with
/// `channels` channels, where cuda.h's format says it. Block-compressed and YUV formats pack
/// several texels per block or plane: none.
pub const fn array_element_size(format: u32, channels: c_uint) -> Option<u64> {
    let per_channel = match format {
        0x01 | 0x08 => 1,        // UNSIGNED_INT8, SIGNED_INT8
        0x02 | 0x09 | 0x10 => 2, // UNSIGNED_INT16, SIGNED_INT16, HALF
        0x03 | 0x0a | 0x20 => 4, // UNSIGNED_INT32, SIGNED_INT32, FLOAT
        // The normalized formats name their channels: UNORM/SNORM_INT8X1..X4, INT16X1..X4.
        0xc0 | 0xc6 => return Some(1),
        0xc1 | 0xc7 | 0xc3 | 0xc9 => return Some(2),
        0xc2 | 0xc8 | 0xc4 | 0xca | 0x50 => return Some(4), // 0x50: UNORM_INT_101010_2
        0xc5 | 0xcb => return Some(8),
        _ => return None,
    };
    match channels {
        1 | 2 | 4 => Some(per_channel * channels as u64),
        _ => None,
    }
}

/// `CUmemcpy3DOperandType` values.
pub const CU_MEMCPY_OPERAND_TYPE_POINTER: u32 = 1;
pub const CU_MEMCPY_OPERAND_TYPE_ARRAY: u32 = 2;

/// The pointer member of `CUmemcpy3DOperand`'s union: rows of `row_length` elements, layers
/// of `layer_height` rows (either 0: packed to the copy's extent), and a location hint.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PointerOperand {
    pub ptr: CUdeviceptr,
    pub row_length: usize,
    pub layer_height: usize,
    pub loc_hint: [u32; 2],
}

/// The array member of `CUmemcpy3DOperand`'s union: the array and the offset where the copy
/// starts, in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ArrayOperand {
    pub array: CUarray,
    pub offset: [usize; 3],
}

/// `CUmemcpy3DOperand`'s union, as in cuda.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub union OperandValue {
    pub ptr: PointerOperand,
    pub array: ArrayOperand,
}

/// `CUmemcpy3DOperand`: which member of the union `value` holds (`operand_type`, a
/// `CU_MEMCPY_OPERAND_TYPE_*`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Memcpy3DOperand {
    pub operand_type: u32,
    pub value: OperandValue,
}

/// `CUDA_MEMCPY3D_BATCH_OP`, enums raw: `extent` is width, height and depth in elements (one
/// byte between pointers, the array's element otherwise).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Memcpy3DBatchOp {
    pub src: Memcpy3DOperand,
    pub dst: Memcpy3DOperand,
    pub extent: [usize; 3],
    pub src_access_order: u32,
    pub flags: c_uint,
}

/// `CUlaunchAttribute`: an id and a 64-byte value union.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LaunchAttribute {
    pub id: u32,
    pub pad: [u8; 4],
    pub value: [u64; 8],
}

/// `CUlaunchConfig`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LaunchConfig {
    pub grid_dim: [c_uint; 3],
    pub block_dim: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub stream: CUstream,
    pub attrs: *mut LaunchAttribute,
    pub num_attrs: c_uint,
}

/// `CUstreamBatchMemOpParams`: a 48-byte union whose first word says which operation.
/// Wait and write operations keep the address at byte 8 and the value at byte 16.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BatchMemOpParams {
    pub operation: u32,
    pub pad: u32,
    pub address: CUdeviceptr,
    pub value: u64,
    pub flags: u32,
    pub pad2: u32,
    pub alias: CUdeviceptr,
    pub reserved: u64,
}

/// `CUDA_KERNEL_NODE_PARAMS` (`_v2` adds `kern` and `ctx` after `extra`: the shim reads them
/// only from the `_v2` entry points).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelNodeParams {
    pub func: CUfunction,
    pub grid_dim: [c_uint; 3],
    pub block_dim: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub kernel_params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
    pub kern: CUkernel,
    pub ctx: CUcontext,
}

/// `CUDA_MEMSET_NODE_PARAMS`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemsetNodeParams {
    pub dst: CUdeviceptr,
    pub pitch: usize,
    pub value: c_uint,
    pub element_size: c_uint,
    pub width: usize,
    pub height: usize,
}

/// `CUDA_MEM_ALLOC_NODE_PARAMS`: the pool's properties (88 bytes the shim never reads), then
/// the size asked for and the address the driver chose.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAllocNodeParams {
    pub pool_props: [u64; 11],
    pub access_descs: *const c_void,
    pub access_desc_count: usize,
    pub bytesize: usize,
    pub dptr: CUdeviceptr,
}

/// `CUgraphNodeParams`: a node's type, then its parameters in a 232-byte union, of which the
/// shim reads a kernel node's (`CUDA_KERNEL_NODE_PARAMS_v3`, laid out as the `_v2` ones).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GraphNodeParams {
    pub type_: u32,
    pub reserved0: [c_int; 3],
    pub kernel: KernelNodeParams,
    pub rest_of_union: [u64; 20],
    pub reserved2: i64,
}

/// `CUgraphEdgeData`: when an edge's upstream node lets the downstream one start (`from_port`)
/// and how (`type_`); all zero is an ordinary edge, after the upstream node completes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GraphEdgeData {
    pub from_port: c_uchar,
    pub to_port: c_uchar,
    pub type_: c_uchar,
    pub reserved: [c_uchar; 5],
}

/// `CUipcMemHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IpcMemHandle {
    pub reserved: [u8; 64],
}

/// `CUipcEventHandle`: the same 64 opaque bytes.
pub type IpcEventHandle = IpcMemHandle;

/// Opaque parameter blocks the shim never reads: only their addresses travel.
pub type CUDA_GRAPH_INSTANTIATE_PARAMS = c_void;
pub type CUctxCreateParams = c_void;
pub type CUexecAffinityParam = c_void;
pub type CUmemAllocationProp = c_void;
pub type CUmemcpyAttributes = c_void;
pub type CUDA_HOST_NODE_PARAMS = c_void;
pub type CUDA_BATCH_MEM_OP_NODE_PARAMS = c_void;
pub type CUgraphExecUpdateResultInfo = c_void;
pub type CUmemPoolPtrExportData = c_void;
pub type CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = c_void;
pub type CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = c_void;

mod layout_checks {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};
    use cudarc::driver::sys as cu;

    const _: () = assert!(size_of::<Memcpy2D>() == size_of::<cu::CUDA_MEMCPY2D>());
    const _: () = assert!(offset_of!(Memcpy2D, height) == offset_of!(cu::CUDA_MEMCPY2D, Height));
    const _: () = assert!(size_of::<Memcpy3D>() == size_of::<cu::CUDA_MEMCPY3D>());
    const _: () = assert!(offset_of!(Memcpy3D, depth) == offset_of!(cu::CUDA_MEMCPY3D, Depth));
    const _: () = assert!(size_of::<Memcpy3DPeer>() == size_of::<cu::CUDA_MEMCPY3D_PEER>());
    const _: () = assert!(offset_of!(Memcpy3DPeer, depth) == offset_of!(cu::CUDA_MEMCPY3D_PEER, Depth));
    const _: () = assert!(size_of::<ArrayDescriptor>() == size_of::<cu::CUDA_ARRAY_DESCRIPTOR>());
    const _: () = assert!(size_of::<Array3DDescriptor>() == size_of::<cu::CUDA_ARRAY3D_DESCRIPTOR>());
    const _: () = assert!(offset_of!(Array3DDescriptor, flags) == offset_of!(cu::CUDA_ARRAY3D_DESCRIPTOR, Flags));
    const _: () = assert!(size_of::<Memcpy3DOperand>() == size_of::<cu::CUmemcpy3DOperand>());
    const _: () = assert!(size_of::<Memcpy3DBatchOp>() == size_of::<cu::CUDA_MEMCPY3D_BATCH_OP>());
    const _: () = assert!(offset_of!(Memcpy3DBatchOp, extent) == offset_of!(cu::CUDA_MEMCPY3D_BATCH_OP, extent));
    const _: () = assert!(offset_of!(Memcpy3DBatchOp, flags) == offset_of!(cu::CUDA_MEMCPY3D_BATCH_OP, flags));
    const _: () = assert!(size_of::<IpcMemHandle>() == size_of::<cu::CUipcMemHandle>());
    const _: () = assert!(size_of::<GraphNodeParams>() == size_of::<cu::CUgraphNodeParams>());
    const _: () = assert!(offset_of!(GraphNodeParams, kernel) == offset_of!(cu::CUgraphNodeParams, __bindgen_anon_1));
    const _: () = assert!(size_of::<KernelNodeParams>() == size_of::<cu::CUDA_KERNEL_NODE_PARAMS_v3>());
    const _: () = assert!(CU_GRAPH_NODE_TYPE_KERNEL == cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL as u32);
    const _: () = assert!(size_of::<GraphEdgeData>() == size_of::<cu::CUgraphEdgeData>());
    const _: () = assert!(offset_of!(GraphEdgeData, type_) == offset_of!(cu::CUgraphEdgeData, type_));
    const _: () = assert!(
        CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u32
            == cu::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u32
    );
    const _: () = assert!(CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u32 == cu::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
    const _: () = assert!(CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER as u32 == cu::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER);
    const _: () = assert!(size_of::<IpcEventHandle>() == size_of::<cu::CUipcEventHandle>());
    const _: () = assert!(size_of::<LaunchAttribute>() == size_of::<cu::CUlaunchAttribute>());
    const _: () = assert!(size_of::<LaunchConfig>() == size_of::<cu::CUlaunchConfig>());
    const _: () = assert!(offset_of!(LaunchConfig, num_attrs) == offset_of!(cu::CUlaunchConfig, numAttrs));
    const _: () = assert!(size_of::<BatchMemOpParams>() == size_of::<cu::CUstreamBatchMemOpParams>());
    const _: () = assert!(align_of::<BatchMemOpParams>() == align_of::<cu::CUstreamBatchMemOpParams>());
    const _: () = assert!(size_of::<KernelNodeParams>() == size_of::<cu::CUDA_KERNEL_NODE_PARAMS_v2>());
    const _: () = assert!(offset_of!(KernelNodeParams, extra) == offset_of!(cu::CUDA_KERNEL_NODE_PARAMS_v2, extra));
    const _: () = assert!(size_of::<MemsetNodeParams>() == size_of::<cu::CUDA_MEMSET_NODE_PARAMS>());
    const _: () = assert!(size_of::<MemAllocNodeParams>() == size_of::<cu::CUDA_MEM_ALLOC_NODE_PARAMS>());
    const _: () = assert!(offset_of!(MemAllocNodeParams, dptr) == offset_of!(cu::CUDA_MEM_ALLOC_NODE_PARAMS, dptr));
}

/// Whether an exported name is a per-thread-default-stream variant: `_ptsz` for calls
/// that take a stream, `_ptds` for those that run on the default stream.
pub const fn is_per_thread_name(name: &str) -> bool {
    let b = name.as_bytes();
    let n = b.len();
    n > 5
        && b[n - 5] == b'_'
        && b[n - 4] == b'p'
        && b[n - 3] == b't'
        && ((b[n - 2] == b's' && b[n - 1] == b'z') || (b[n - 2] == b'd' && b[n - 1] == b's'))
}

/// Renders an argument the same way wherever a call is logged, so that the stand-in's log
/// of what it received can be compared line for line with what a program passed.
pub trait ArgRepr {
    fn repr(&self) -> String;
}

macro_rules! decimal_repr {
    ($($t:ty),*) => { $(impl ArgRepr for $t { fn repr(&self) -> String { self.to_string() } })* };
}
decimal_repr!(u8, u16, u32, i32, u64, usize);

impl<T> ArgRepr for *mut T {
    fn repr(&self) -> String {
        format!("{:#x}", *self as usize)
    }
}
impl<T> ArgRepr for *const T {
    fn repr(&self) -> String {
        format!("{:#x}", *self as usize)
    }
}
/// A handle's first eight bytes, enough to tell sentinels apart.
impl ArgRepr for IpcMemHandle {
    fn repr(&self) -> String {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.reserved[..8]);
        format!("{:#x}", u64::from_le_bytes(first))
    }
}
impl ArgRepr for CUhostFn {
    fn repr(&self) -> String {
        format!("{:#x}", self.map_or(0, |f| f as usize))
    }
}
impl ArgRepr for CUstreamCallback {
    fn repr(&self) -> String {
        format!("{:#x}", self.map_or(0, |f| f as usize))
    }
}

/// Formats one call as `name(arg=value, ...)`.
pub fn render_call(name: &str, args: &[(&str, String)]) -> String {
    let mut line = String::with_capacity(64);
    line.push_str(name);
    line.push('(');
    for (i, (arg, value)) in args.iter().enumerate() {
        if i > 0 {
            line.push_str(", ");
        }
        line.push_str(arg);
        line.push('=');
        line.push_str(value);
    }
    line.push(')');
    line
}

/// The table. `driver_api!(m)` invokes `m! { ... }` with one entry per family:
///
/// ```text
/// family [ExportedName, ExportedName_ptsz, ...] (arg: Type, ...);
/// ```
///
/// Every function returns `CUresult`. The names of a family share one signature; a
/// `_ptsz`/`_ptds` name is the per-thread-default-stream variant (see
/// [`is_per_thread_name`]). 32-bit legacy entry points whose ABI differs (`cuMemAlloc`
/// without `_v2`, ...) are not in the table: they pass through unseen, and no program
/// built in the last decade reaches them.
#[macro_export]
macro_rules! driver_api {
    ($m:ident) => {
        $m! {
            // Initialisation and contexts.
            init [cuInit] (flags: c_uint);
            ctx_create [cuCtxCreate, cuCtxCreate_v2] (pctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
            ctx_create_v3 [cuCtxCreate_v3] (pctx: *mut CUcontext, params: *mut CUexecAffinityParam, num_params: c_int, flags: c_uint, dev: CUdevice);
            ctx_create_v4 [cuCtxCreate_v4] (pctx: *mut CUcontext, params: *mut CUctxCreateParams, flags: c_uint, dev: CUdevice);
            ctx_destroy [cuCtxDestroy, cuCtxDestroy_v2] (ctx: CUcontext);
            ctx_synchronize [cuCtxSynchronize] ();
            ctx_synchronize_v2 [cuCtxSynchronize_v2] (ctx: CUcontext);
            primary_ctx_retain [cuDevicePrimaryCtxRetain] (pctx: *mut CUcontext, dev: CUdevice);
            primary_ctx_release [cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2] (dev: CUdevice);
            primary_ctx_reset [cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2] (dev: CUdevice);

            // Allocation and deallocation.
            mem_alloc [cuMemAlloc_v2] (dptr: *mut CUdeviceptr, bytesize: usize);
            mem_alloc_pitch [cuMemAllocPitch_v2] (dptr: *mut CUdeviceptr, pitch: *mut usize, width_in_bytes: usize, height: usize, element_size_bytes: c_uint);
            mem_alloc_managed [cuMemAllocManaged] (dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint);
            mem_alloc_host [cuMemAllocHost_v2] (pp: *mut *mut c_void, bytesize: usize);
            mem_host_alloc [cuMemHostAlloc] (pp: *mut *mut c_void, bytesize: usize, flags: c_uint);
            mem_host_register [cuMemHostRegister, cuMemHostRegister_v2] (p: *mut c_void, bytesize: usize, flags: c_uint);
            mem_host_unregister [cuMemHostUnregister] (p: *mut c_void);
            mem_free [cuMemFree_v2] (dptr: CUdeviceptr);
            mem_free_host [cuMemFreeHost] (p: *mut c_void);
            mem_alloc_async [cuMemAllocAsync, cuMemAllocAsync_ptsz] (dptr: *mut CUdeviceptr, bytesize: usize, stream: CUstream);
            mem_alloc_from_pool_async [cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz] (dptr: *mut CUdeviceptr, bytesize: usize, pool: CUmemoryPool, stream: CUstream);
            mem_free_async [cuMemFreeAsync, cuMemFreeAsync_ptsz] (dptr: CUdeviceptr, stream: CUstream);
            mem_create [cuMemCreate] (handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: u64);
            mem_map [cuMemMap] (ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemGenericAllocationHandle, flags: u64);
            mem_unmap [cuMemUnmap] (ptr: CUdeviceptr, size: usize);
            mem_release [cuMemRelease] (handle: CUmemGenericAllocationHandle);
            ipc_get_mem_handle [cuIpcGetMemHandle] (handle: *mut IpcMemHandle, dptr: CUdeviceptr);
            ipc_open_mem_handle [cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2] (pdptr: *mut CUdeviceptr, handle: IpcMemHandle, flags: c_uint);
            ipc_close_mem_handle [cuIpcCloseMemHandle] (dptr: CUdeviceptr);
            mem_pool_export_pointer [cuMemPoolExportPointer] (share_data: *mut CUmemPoolPtrExportData, ptr: CUdeviceptr);
            mem_pool_import_pointer [cuMemPoolImportPointer] (ptr_out: *mut CUdeviceptr, pool: CUmemoryPool, share_data: *mut CUmemPoolPtrExportData);

            // Arrays (memory with a handle and no address).
            array_create [cuArrayCreate_v2] (handle: *mut CUarray, descriptor: *const ArrayDescriptor);
            array_3d_create [cuArray3DCreate_v2] (handle: *mut CUarray, descriptor: *const Array3DDescriptor);
            array_destroy [cuArrayDestroy] (array: CUarray);
            mipmapped_array_create [cuMipmappedArrayCreate] (handle: *mut CUmipmappedArray, descriptor: *const Array3DDescriptor, num_levels: c_uint);
            mipmapped_array_get_level [cuMipmappedArrayGetLevel] (level_array: *mut CUarray, mipmap: CUmipmappedArray, level: c_uint);
            mipmapped_array_destroy [cuMipmappedArrayDestroy] (mipmap: CUmipmappedArray);

            // Copies.
            memcpy [cuMemcpy, cuMemcpy_ptds] (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
            memcpy_async [cuMemcpyAsync, cuMemcpyAsync_ptsz] (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
            memcpy_htod [cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds] (dst: CUdeviceptr, src: *const c_void, bytes: usize);
            memcpy_dtoh [cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds] (dst: *mut c_void, src: CUdeviceptr, bytes: usize);
            memcpy_dtod [cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds] (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
            memcpy_dtoa [cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds] (dst: CUarray, dst_offset: usize, src: CUdeviceptr, bytes: usize);
            memcpy_atod [cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds] (dst: CUdeviceptr, src: CUarray, src_offset: usize, bytes: usize);
            memcpy_htoa [cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds] (dst: CUarray, dst_offset: usize, src: *const c_void, bytes: usize);
            memcpy_atoh [cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds] (dst: *mut c_void, src: CUarray, src_offset: usize, bytes: usize);
            memcpy_atoa [cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds] (dst: CUarray, dst_offset: usize, src: CUarray, src_offset: usize, bytes: usize);
            memcpy_htoa_async [cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz] (dst: CUarray, dst_offset: usize, src: *const c_void, bytes: usize, stream: CUstream);
            memcpy_atoh_async [cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz] (dst: *mut c_void, src: CUarray, src_offset: usize, bytes: usize, stream: CUstream);
            memcpy_htod_async [cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz] (dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
            memcpy_dtoh_async [cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz] (dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);
            memcpy_dtod_async [cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz] (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
            memcpy_peer [cuMemcpyPeer, cuMemcpyPeer_ptds] (dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, bytes: usize);
            memcpy_peer_async [cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz] (dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, bytes: usize, stream: CUstream);
            memcpy_2d [cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds] (copy: *const Memcpy2D);
            memcpy_2d_async [cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz] (copy: *const Memcpy2D, stream: CUstream);
            memcpy_3d [cuMemcpy3D_v2, cuMemcpy3D_v2_ptds] (copy: *const Memcpy3D);
            memcpy_3d_async [cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz] (copy: *const Memcpy3D, stream: CUstream);
            memcpy_3d_peer [cuMemcpy3DPeer, cuMemcpy3DPeer_ptds] (copy: *const Memcpy3DPeer);
            memcpy_3d_peer_async [cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz] (copy: *const Memcpy3DPeer, stream: CUstream);
            memcpy_batch_async [cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz] (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut CUmemcpyAttributes, attrs_idxs: *mut usize, num_attrs: usize, fail_idx: *mut usize, stream: CUstream);
            memcpy_batch_async_v2 [cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz] (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut CUmemcpyAttributes, attrs_idxs: *mut usize, num_attrs: usize, stream: CUstream);
            memcpy_3d_batch_async [cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz] (num_ops: usize, ops: *mut Memcpy3DBatchOp, fail_idx: *mut usize, flags: u64, stream: CUstream);
            memcpy_3d_batch_async_v2 [cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz] (num_ops: usize, ops: *mut Memcpy3DBatchOp, flags: u64, stream: CUstream);

            // Memsets.
            memset_d8 [cuMemsetD8_v2, cuMemsetD8_v2_ptds] (dst: CUdeviceptr, value: c_uchar, count: usize);
            memset_d16 [cuMemsetD16_v2, cuMemsetD16_v2_ptds] (dst: CUdeviceptr, value: c_ushort, count: usize);
            memset_d32 [cuMemsetD32_v2, cuMemsetD32_v2_ptds] (dst: CUdeviceptr, value: c_uint, count: usize);
            memset_d2d8 [cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds] (dst: CUdeviceptr, pitch: usize, value: c_uchar, width: usize, height: usize);
            memset_d2d16 [cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds] (dst: CUdeviceptr, pitch: usize, value: c_ushort, width: usize, height: usize);
            memset_d2d32 [cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds] (dst: CUdeviceptr, pitch: usize, value: c_uint, width: usize, height: usize);
            memset_d8_async [cuMemsetD8Async, cuMemsetD8Async_ptsz] (dst: CUdeviceptr, value: c_uchar, count: usize, stream: CUstream);
            memset_d16_async [cuMemsetD16Async, cuMemsetD16Async_ptsz] (dst: CUdeviceptr, value: c_ushort, count: usize, stream: CUstream);
            memset_d32_async [cuMemsetD32Async, cuMemsetD32Async_ptsz] (dst: CUdeviceptr, value: c_uint, count: usize, stream: CUstream);
            memset_d2d8_async [cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz] (dst: CUdeviceptr, pitch: usize, value: c_uchar, width: usize, height: usize, stream: CUstream);
            memset_d2d16_async [cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz] (dst: CUdeviceptr, pitch: usize, value: c_ushort, width: usize, height: usize, stream: CUstream);
            memset_d2d32_async [cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz] (dst: CUdeviceptr, pitch: usize, value: c_uint, width: usize, height: usize, stream: CUstream);

            // Launches and host work.
            launch_kernel [cuLaunchKernel, cuLaunchKernel_ptsz] (f: CUfunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_mem_bytes: c_uint, stream: CUstream, kernel_params: *mut *mut c_void, extra: *mut *mut c_void);
            launch_kernel_ex [cuLaunchKernelEx, cuLaunchKernelEx_ptsz] (config: *const LaunchConfig, f: CUfunction, kernel_params: *mut *mut c_void, extra: *mut *mut c_void);
            launch_cooperative_kernel [cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz] (f: CUfunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_mem_bytes: c_uint, stream: CUstream, kernel_params: *mut *mut c_void);
            launch_host_func [cuLaunchHostFunc, cuLaunchHostFunc_ptsz] (stream: CUstream, func: CUhostFn, user_data: *mut c_void);
            stream_add_callback [cuStreamAddCallback, cuStreamAddCallback_ptsz] (stream: CUstream, callback: CUstreamCallback, user_data: *mut c_void, flags: c_uint);

            // Code.
            module_load [cuModuleLoad] (module: *mut CUmodule, fname: *const c_char);
            module_load_data [cuModuleLoadData] (module: *mut CUmodule, image: *const c_void);
            module_load_data_ex [cuModuleLoadDataEx] (module: *mut CUmodule, image: *const c_void, num_options: c_uint, options: *mut u32, option_values: *mut *mut c_void);
            module_load_fat_binary [cuModuleLoadFatBinary] (module: *mut CUmodule, fat_cubin: *const c_void);
            module_get_function [cuModuleGetFunction] (hfunc: *mut CUfunction, module: CUmodule, name: *const c_char);
            module_unload [cuModuleUnload] (hmod: CUmodule);
            library_load_data [cuLibraryLoadData] (library: *mut CUlibrary, code: *const c_void, jit_options: *mut u32, jit_option_values: *mut *mut c_void, num_jit_options: c_uint, library_options: *mut u32, library_option_values: *mut *mut c_void, num_library_options: c_uint);
            library_load_from_file [cuLibraryLoadFromFile] (library: *mut CUlibrary, file_name: *const c_char, jit_options: *mut u32, jit_option_values: *mut *mut c_void, num_jit_options: c_uint, library_options: *mut u32, library_option_values: *mut *mut c_void, num_library_options: c_uint);
            library_get_kernel [cuLibraryGetKernel] (kernel: *mut CUkernel, library: CUlibrary, name: *const c_char);
            kernel_get_function [cuKernelGetFunction] (func: *mut CUfunction, kernel: CUkernel);
            library_unload [cuLibraryUnload] (library: CUlibrary);

            // Streams.
            stream_create [cuStreamCreate] (stream: *mut CUstream, flags: c_uint);
            stream_create_with_priority [cuStreamCreateWithPriority] (stream: *mut CUstream, flags: c_uint, priority: c_int);
            stream_destroy [cuStreamDestroy, cuStreamDestroy_v2] (stream: CUstream);
            stream_synchronize [cuStreamSynchronize, cuStreamSynchronize_ptsz] (stream: CUstream);
            stream_query [cuStreamQuery, cuStreamQuery_ptsz] (stream: CUstream);
            stream_set_attribute [cuStreamSetAttribute, cuStreamSetAttribute_ptsz] (stream: CUstream, attr: u32, value: *const c_void);
            stream_wait_event [cuStreamWaitEvent, cuStreamWaitEvent_ptsz] (stream: CUstream, event: CUevent, flags: c_uint);
            stream_begin_capture_v1 [cuStreamBeginCapture, cuStreamBeginCapture_ptsz] (stream: CUstream);
            stream_begin_capture [cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz] (stream: CUstream, mode: u32);
            stream_end_capture [cuStreamEndCapture, cuStreamEndCapture_ptsz] (stream: CUstream, graph: *mut CUgraph);
            stream_begin_capture_to_graph [cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph_ptsz] (stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, dep_data: *const GraphEdgeData, num_deps: usize, mode: u32);
            stream_update_capture_dependencies [cuStreamUpdateCaptureDependencies, cuStreamUpdateCaptureDependencies_ptsz] (stream: CUstream, deps: *mut CUgraphNode, num_deps: usize, flags: c_uint);
            stream_update_capture_dependencies_v2 [cuStreamUpdateCaptureDependencies_v2, cuStreamUpdateCaptureDependencies_v2_ptsz] (stream: CUstream, deps: *mut CUgraphNode, dep_data: *const GraphEdgeData, num_deps: usize, flags: c_uint);
            stream_wait_value_32 [cuStreamWaitValue32, cuStreamWaitValue32_ptsz, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz] (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint);
            stream_wait_value_64 [cuStreamWaitValue64, cuStreamWaitValue64_ptsz, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz] (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint);
            stream_write_value_32 [cuStreamWriteValue32, cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz] (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint);
            stream_write_value_64 [cuStreamWriteValue64, cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz] (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint);
            signal_external_semaphores [cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync_ptsz] (sems: *const CUexternalSemaphore, params: *const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, count: c_uint, stream: CUstream);
            wait_external_semaphores [cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync_ptsz] (sems: *const CUexternalSemaphore, params: *const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, count: c_uint, stream: CUstream);
            stream_batch_mem_op [cuStreamBatchMemOp, cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz] (stream: CUstream, count: c_uint, params: *mut BatchMemOpParams, flags: c_uint);

            // Events.
            event_create [cuEventCreate] (event: *mut CUevent, flags: c_uint);
            event_record [cuEventRecord, cuEventRecord_ptsz] (event: CUevent, stream: CUstream);
            event_record_with_flags [cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz] (event: CUevent, stream: CUstream, flags: c_uint);
            event_synchronize [cuEventSynchronize] (event: CUevent);
            event_query [cuEventQuery] (event: CUevent);
            event_destroy [cuEventDestroy, cuEventDestroy_v2] (event: CUevent);
            ipc_get_event_handle [cuIpcGetEventHandle] (handle: *mut IpcEventHandle, event: CUevent);
            ipc_open_event_handle [cuIpcOpenEventHandle] (event: *mut CUevent, handle: IpcEventHandle);

            // Graphs.
            graph_instantiate [cuGraphInstantiate, cuGraphInstantiate_v2] (exec: *mut CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, log_buffer: *mut c_char, buffer_size: usize);
            graph_instantiate_with_flags [cuGraphInstantiateWithFlags] (exec: *mut CUgraphExec, graph: CUgraph, flags: u64);
            graph_instantiate_with_params [cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz] (exec: *mut CUgraphExec, graph: CUgraph, params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS);
            graph_launch [cuGraphLaunch, cuGraphLaunch_ptsz] (exec: CUgraphExec, stream: CUstream);
            graph_exec_destroy [cuGraphExecDestroy] (exec: CUgraphExec);
            graph_destroy [cuGraphDestroy] (graph: CUgraph);
            graph_create [cuGraphCreate] (graph: *mut CUgraph, flags: c_uint);
            graph_clone [cuGraphClone] (clone: *mut CUgraph, original: CUgraph);
            graph_add_kernel_node [cuGraphAddKernelNode, cuGraphAddKernelNode_v2] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *const KernelNodeParams);
            graph_add_memcpy_node [cuGraphAddMemcpyNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, copy: *const Memcpy3D, ctx: CUcontext);
            graph_add_memset_node [cuGraphAddMemsetNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *const MemsetNodeParams, ctx: CUcontext);
            graph_add_host_node [cuGraphAddHostNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *const CUDA_HOST_NODE_PARAMS);
            graph_add_empty_node [cuGraphAddEmptyNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize);
            graph_add_child_graph_node [cuGraphAddChildGraphNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, child: CUgraph);
            graph_add_event_record_node [cuGraphAddEventRecordNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, event: CUevent);
            graph_add_event_wait_node [cuGraphAddEventWaitNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, event: CUevent);
            graph_add_mem_alloc_node [cuGraphAddMemAllocNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *mut MemAllocNodeParams);
            graph_add_mem_free_node [cuGraphAddMemFreeNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, dptr: CUdeviceptr);
            graph_add_batch_mem_op_node [cuGraphAddBatchMemOpNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *const CUDA_BATCH_MEM_OP_NODE_PARAMS);
            graph_add_node [cuGraphAddNode] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize, params: *mut GraphNodeParams);
            graph_add_node_v2 [cuGraphAddNode_v2] (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, edge_data: *const GraphEdgeData, num_deps: usize, params: *mut GraphNodeParams);
            graph_add_dependencies [cuGraphAddDependencies] (graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, num: usize);
            graph_add_dependencies_v2 [cuGraphAddDependencies_v2] (graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, edge_data: *const GraphEdgeData, num: usize);
            graph_remove_dependencies [cuGraphRemoveDependencies] (graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, num: usize);
            graph_remove_dependencies_v2 [cuGraphRemoveDependencies_v2] (graph: CUgraph, from: *const CUgraphNode, to: *const CUgraphNode, edge_data: *const GraphEdgeData, num: usize);
            graph_destroy_node [cuGraphDestroyNode] (node: CUgraphNode);
            graph_kernel_node_set_params [cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams_v2] (node: CUgraphNode, params: *const KernelNodeParams);
            graph_memcpy_node_set_params [cuGraphMemcpyNodeSetParams] (node: CUgraphNode, copy: *const Memcpy3D);
            graph_memset_node_set_params [cuGraphMemsetNodeSetParams] (node: CUgraphNode, params: *const MemsetNodeParams);
            graph_exec_kernel_node_set_params [cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams_v2] (exec: CUgraphExec, node: CUgraphNode, params: *const KernelNodeParams);
            graph_exec_memcpy_node_set_params [cuGraphExecMemcpyNodeSetParams] (exec: CUgraphExec, node: CUgraphNode, copy: *const Memcpy3D, ctx: CUcontext);
            graph_exec_memset_node_set_params [cuGraphExecMemsetNodeSetParams] (exec: CUgraphExec, node: CUgraphNode, params: *const MemsetNodeParams, ctx: CUcontext);
            graph_exec_update [cuGraphExecUpdate_v2] (exec: CUgraphExec, graph: CUgraph, result_info: *mut CUgraphExecUpdateResultInfo);
            graph_exec_update_v1 [cuGraphExecUpdate] (exec: CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, result: *mut u32);
            graph_upload [cuGraphUpload, cuGraphUpload_ptsz] (exec: CUgraphExec, stream: CUstream);

            // Entry points.
            get_proc_address [cuGetProcAddress] (symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64);
            get_proc_address_v2 [cuGetProcAddress_v2] (symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64, symbol_status: *mut u32);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_thread_names_are_recognised_by_suffix() {
        assert!(is_per_thread_name("cuLaunchKernel_ptsz"));
        assert!(is_per_thread_name("cuMemcpyDtoH_v2_ptds"));
        assert!(!is_per_thread_name("cuLaunchKernel"));
        assert!(!is_per_thread_name("cuMemcpyDtoH_v2"));
        assert!(!is_per_thread_name("_ptsz"));
    }

    #[test]
    fn calls_render_as_name_and_arguments() {
        let p = 0x1000 as *mut c_void;
        let line = render_call("cuMemFreeAsync", &[("dptr", 16u64.repr()), ("stream", p.repr())]);
        assert_eq!(line, "cuMemFreeAsync(dptr=16, stream=0x1000)");
    }
}
