//! A stand-in `libnccl.so.2` for machines without GPUs.
//!
//! It exports every name of the hooked NCCL table (generated from
//! `streamsan_driver_api::nccl_api!`) and the few functions a program needs around them:
//! `ncclCommInitAll` (the communicators of one process over its devices, the way a
//! single-process multi-GPU NCCL program starts), `ncclCommCount`, `ncclCommUserRank`,
//! `ncclCommDestroy`, `ncclGetVersion`. Each call is logged and can be made to fail exactly
//! as the stand-in driver's are (`STANDIN_LOG`, `STANDIN_FAIL`: the same module).
//!
//! A collective moves real bytes in the stand-in driver's memory (which is the process's own
//! address space): the rank's send block lands where NCCL would put it (an all-reduce copies,
//! as a sum over one rank would), at once, as the stand-in driver's asynchronous copies do.
//! Like that driver it orders nothing: what it shows about ordering proves nothing.

#![allow(clippy::too_many_arguments, clippy::missing_safety_doc)]

#[path = "../../standin/src/log.rs"]
mod log;

use core::ffi::{c_int, c_void};
use std::collections::HashMap;
use std::sync::Mutex;

use streamsan_driver_api::*;

/// A communicator: this rank and how many there are.
#[derive(Clone, Copy)]
struct Comm {
    rank: c_int,
    ranks: c_int,
}

/// Communicators by handle (the handle is a leaked box's address, never dereferenced).
static COMMS: Mutex<Option<HashMap<usize, Comm>>> = Mutex::new(None);

fn comm(handle: NcclComm) -> Option<Comm> {
    COMMS.lock().unwrap().as_ref().and_then(|m| m.get(&(handle as usize)).copied())
}

unsafe fn put(out: *mut c_int, value: c_int) -> NcclResult {
    if out.is_null() {
        return NCCL_INVALID_ARGUMENT;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { out.write(value) };
    NCCL_SUCCESS
}

/// Copies `len` bytes from `src` to `dst` for a call on a known communicator.
unsafe fn copy(handle: NcclComm, dst: u64, src: u64, len: u64, datatype: c_int) -> NcclResult {
    if comm(handle).is_none() || datatype_size(datatype).is_none() {
        return NCCL_INVALID_ARGUMENT;
    }
    if dst != 0 && src != 0 && dst != src && len > 0 {
        // SAFETY: the program's buffers, of at least `len` bytes (NCCL's contract).
        unsafe { core::ptr::copy(src as *const u8, dst as *mut u8, len as usize) };
    }
    NCCL_SUCCESS
}

fn bytes(count: usize, datatype: c_int) -> u64 {
    count as u64 * datatype_size(datatype).unwrap_or(0)
}

/// The rank of a known communicator (0 otherwise: the call then fails in [`copy`]).
fn rank(handle: NcclComm) -> u64 {
    comm(handle).map_or(0, |c| c.rank as u64)
}

/// What each entry point of the table does.
mod behaviour {
    use super::*;

    pub unsafe fn all_reduce(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        _op: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        unsafe { copy(comm, recv as u64, send as u64, bytes(count, dt), dt) }
    }
    pub unsafe fn broadcast(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        _root: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        unsafe { copy(comm, recv as u64, send as u64, bytes(count, dt), dt) }
    }
    pub unsafe fn bcast(
        buff: *mut c_void,
        _count: usize,
        dt: c_int,
        _root: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        unsafe { copy(comm, buff as u64, buff as u64, 0, dt) }
    }
    pub unsafe fn reduce(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        _op: c_int,
        root: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let to = if rank(comm) == root as u64 { recv as u64 } else { 0 };
        unsafe { copy(comm, to, send as u64, bytes(count, dt), dt) }
    }
    pub unsafe fn all_gather(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let block = bytes(count, dt);
        unsafe { copy(comm, recv as u64 + rank(comm) * block, send as u64, block, dt) }
    }
    pub unsafe fn reduce_scatter(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        _op: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let block = bytes(count, dt);
        unsafe { copy(comm, recv as u64, send as u64 + rank(comm) * block, block, dt) }
    }
    pub unsafe fn all_to_all(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let block = bytes(count, dt);
        let at = rank(comm) * block;
        unsafe { copy(comm, recv as u64 + at, send as u64 + at, block, dt) }
    }
    pub unsafe fn gather(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        root: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let block = bytes(count, dt);
        let to = if rank(comm) == root as u64 { recv as u64 + rank(comm) * block } else { 0 };
        unsafe { copy(comm, to, send as u64, block, dt) }
    }
    pub unsafe fn scatter(
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        dt: c_int,
        root: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        let block = bytes(count, dt);
        let from = if rank(comm) == root as u64 { send as u64 + rank(comm) * block } else { 0 };
        unsafe { copy(comm, recv as u64, from, block, dt) }
    }
    pub unsafe fn send(
        _send: *const c_void,
        _count: usize,
        dt: c_int,
        _peer: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        unsafe { copy(comm, 0, 0, 0, dt) }
    }
    pub unsafe fn recv(
        _recv: *mut c_void,
        _count: usize,
        dt: c_int,
        _peer: c_int,
        comm: NcclComm,
        _s: CUstream,
    ) -> NcclResult {
        unsafe { copy(comm, 0, 0, 0, dt) }
    }
    pub unsafe fn group_start() -> NcclResult {
        NCCL_SUCCESS
    }
    pub unsafe fn group_end() -> NcclResult {
        NCCL_SUCCESS
    }
}

macro_rules! standin_exports {
    ($( $family:ident [$name:ident] ($($arg:ident : $ty:ty),*); )*) => {
        $(
            #[unsafe(no_mangle)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> NcclResult {
                log::call(stringify!($name), || vec![$((stringify!($arg), $arg.repr())),*], || unsafe { behaviour::$family($($arg),*) })
            }
        )*
    };
}

nccl_api!(standin_exports);

/// `ncclCommInitAll(comms, ndev, devlist)`: `ndev` communicators of one process, rank `i`
/// on the `i`-th device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitAll(comms: *mut NcclComm, ndev: c_int, devlist: *const c_int) -> NcclResult {
    log::call(
        "ncclCommInitAll",
        || vec![("comms", comms.repr()), ("ndev", ndev.repr()), ("devlist", devlist.repr())],
        || {
            if comms.is_null() || ndev <= 0 {
                return NCCL_INVALID_ARGUMENT;
            }
            let mut all = COMMS.lock().unwrap();
            for rank in 0..ndev {
                let handle = Box::into_raw(Box::new(0u64)) as usize;
                all.get_or_insert_with(HashMap::new).insert(handle, Comm { rank, ranks: ndev });
                // SAFETY: the caller's array of `ndev` communicators.
                unsafe { comms.add(rank as usize).write(handle as NcclComm) };
            }
            NCCL_SUCCESS
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(handle: NcclComm, count: *mut c_int) -> NcclResult {
    log::call(
        "ncclCommCount",
        || vec![("comm", handle.repr()), ("count", count.repr())],
        || match comm(handle) {
            Some(c) => unsafe { put(count, c.ranks) },
            None => NCCL_INVALID_ARGUMENT,
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(handle: NcclComm, rank: *mut c_int) -> NcclResult {
    log::call(
        "ncclCommUserRank",
        || vec![("comm", handle.repr()), ("rank", rank.repr())],
        || match comm(handle) {
            Some(c) => unsafe { put(rank, c.rank) },
            None => NCCL_INVALID_ARGUMENT,
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(handle: NcclComm) -> NcclResult {
    log::call(
        "ncclCommDestroy",
        || vec![("comm", handle.repr())],
        || match COMMS.lock().unwrap().as_mut().and_then(|m| m.remove(&(handle as usize))) {
            Some(_) => NCCL_SUCCESS,
            None => NCCL_INVALID_ARGUMENT,
        },
    )
}

/// NCCL 2.28.3, as `NCCL_VERSION_CODE` writes it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> NcclResult {
    unsafe { put(version, 22803) }
}
