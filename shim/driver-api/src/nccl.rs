//! The NCCL functions that streamsan interposes, described once, as the driver's are:
//! [`nccl_api!`](crate::nccl_api!) has one entry per function, in `nccl.h`'s signatures, its
//! enums passed raw as `c_int` so that a value this crate does not know (a user-defined
//! reduction) passes through.

use core::ffi::{c_int, c_void};

/// `ncclResult_t`, kept raw.
pub type NcclResult = u32;
/// `ncclComm_t`: opaque.
pub type NcclComm = *mut c_void;

pub const NCCL_SUCCESS: NcclResult = 0;
pub const NCCL_INVALID_ARGUMENT: NcclResult = 4;
/// A non-blocking communicator's answer: the operation is enqueued and will run; the
/// program polls `ncclCommGetAsyncError` for its outcome.
pub const NCCL_IN_PROGRESS: NcclResult = 7;

/// The size in bytes of one element of `ncclDataType_t` value `datatype`, if NCCL 2.2x
/// defines it (`ncclInt8` = 0 ... `ncclFloat8e5m2` = 11).
pub const fn datatype_size(datatype: c_int) -> Option<u64> {
    match datatype {
        0 | 1 | 10 | 11 => Some(1), // int8, uint8, float8 e4m3, float8 e5m2
        6 | 9 => Some(2),           // float16, bfloat16
        2 | 3 | 7 => Some(4),       // int32, uint32, float32
        4 | 5 | 8 => Some(8),       // int64, uint64, float64
        _ => None,
    }
}

/// The table. `nccl_api!(m)` invokes `m! { ... }` with one entry per function, in the
/// driver table's shape (`family [ExportedName] (arg: Type, ...);`); every function returns
/// [`NcclResult`]. `ncclAlltoAll`, `ncclGather` and `ncclScatter` appeared in NCCL 2.28: a
/// program calling them has an NCCL that exports them.
#[macro_export]
macro_rules! nccl_api {
    ($m:ident) => {
        $m! {
            all_reduce [ncclAllReduce] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, op: c_int, comm: NcclComm, stream: CUstream);
            broadcast [ncclBroadcast] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: NcclComm, stream: CUstream);
            bcast [ncclBcast] (buff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: NcclComm, stream: CUstream);
            reduce [ncclReduce] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, op: c_int, root: c_int, comm: NcclComm, stream: CUstream);
            all_gather [ncclAllGather] (sendbuff: *const c_void, recvbuff: *mut c_void, sendcount: usize, datatype: c_int, comm: NcclComm, stream: CUstream);
            reduce_scatter [ncclReduceScatter] (sendbuff: *const c_void, recvbuff: *mut c_void, recvcount: usize, datatype: c_int, op: c_int, comm: NcclComm, stream: CUstream);
            all_to_all [ncclAlltoAll] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, comm: NcclComm, stream: CUstream);
            gather [ncclGather] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: NcclComm, stream: CUstream);
            scatter [ncclScatter] (sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: NcclComm, stream: CUstream);
            send [ncclSend] (sendbuff: *const c_void, count: usize, datatype: c_int, peer: c_int, comm: NcclComm, stream: CUstream);
            recv [ncclRecv] (recvbuff: *mut c_void, count: usize, datatype: c_int, peer: c_int, comm: NcclComm, stream: CUstream);
            group_start [ncclGroupStart] ();
            group_end [ncclGroupEnd] ();
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_sizes_follow_nccl_h() {
        assert_eq!(datatype_size(7), Some(4)); // ncclFloat32
        assert_eq!(datatype_size(9), Some(2)); // ncclBfloat16
        assert_eq!(datatype_size(8), Some(8)); // ncclFloat64
        assert_eq!(datatype_size(0), Some(1)); // ncclInt8
        assert_eq!(datatype_size(12), None);
        assert_eq!(datatype_size(-1), None);
    }
}
