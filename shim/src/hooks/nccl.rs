//! NCCL collectives and point-to-point calls: each is an operation on its stream that reads
//! its send buffer and writes its receive buffer, the exact bytes NCCL touches on this rank
//! (`docs/semantics.md#collectives-nccl`). Calls in a group are issued when the outermost
//! `ncclGroupEnd` returns, in call order, as NCCL issues them.

use core::ffi::{c_int, c_void};
use std::cell::RefCell;

use streamsan::model::op::{Access, HostEffect, Mode, Origin};
use streamsan::model::streams::StreamRef;
use streamsan::model::Work;
use streamsan::phases::Phase;
use streamsan_driver_api::*;

use super::batch;
use super::call::stream_of_handle;
use super::model::unsettled;
use crate::intercept::nccl::{comm_count, comm_user_rank, export_nccl_hooks, nccl_real as real, NcclCall};
use crate::sites::{stack, thread};

/// Which buffers a call reads and writes, on which ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Gather,
    Scatter,
    Send,
    Recv,
}

/// A call NCCL accepted, waiting to be issued on its stream.
struct Collective {
    shape: Shape,
    origin: Origin,
    send: u64,
    recv: u64,
    count: u64,
    element: u64,
    root: c_int,
    comm: NcclComm,
    stream: StreamRef,
}

impl Collective {
    /// What the call touches, seen from `rank` of `ranks`.
    fn accesses(&self, rank: Option<c_int>, ranks: Option<c_int>) -> Vec<Access> {
        let block = self.count * self.element;
        let all = ranks.map(|n| n.max(0) as u64 * block);
        let is_root = rank == Some(self.root);
        let mut accesses = Vec::with_capacity(3);
        let mut touch = |addr: u64, len: Option<u64>, mode: Mode| {
            if let Some(len) = len.filter(|&len| addr != 0 && len > 0) {
                accesses.push(Access::new(addr, len, mode));
            }
        };
        // The receive buffer of `ranks` blocks, without the block at `own` when it is the
        // send buffer itself (in place: NCCL does not copy it onto itself).
        let gathered = |touch: &mut dyn FnMut(u64, Option<u64>, Mode), own: Option<c_int>| {
            let own_block = own.map(|r| self.recv + r as u64 * block);
            match (own_block, all) {
                (Some(at), Some(all)) if at == self.send => {
                    touch(self.recv, Some(at - self.recv), Mode::Write);
                    touch(at + block, Some((self.recv + all).saturating_sub(at + block)), Mode::Write);
                }
                _ => touch(self.recv, all, Mode::Write),
            }
        };
        match self.shape {
            Shape::AllReduce => {
                touch(self.send, Some(block), Mode::Read);
                touch(self.recv, Some(block), Mode::Write);
            }
            Shape::Broadcast if is_root => {
                touch(self.send, Some(block), Mode::Read);
                if self.send != self.recv {
                    touch(self.recv, Some(block), Mode::Write);
                }
            }
            Shape::Broadcast => {
                // Unknown rank: the receive buffer is written on every rank but an in-place root.
                if rank.is_some() || self.send != self.recv {
                    touch(self.recv, Some(block), Mode::Write);
                }
            }
            Shape::Reduce => {
                touch(self.send, Some(block), Mode::Read);
                if is_root {
                    touch(self.recv, Some(block), Mode::Write);
                }
            }
            Shape::AllGather => {
                touch(self.send, Some(block), Mode::Read);
                gathered(&mut touch, rank);
            }
            Shape::ReduceScatter => {
                touch(self.send, all, Mode::Read);
                touch(self.recv, Some(block), Mode::Write);
            }
            Shape::AllToAll => {
                touch(self.send, all, Mode::Read);
                touch(self.recv, all, Mode::Write);
            }
            Shape::Gather => {
                touch(self.send, Some(block), Mode::Read);
                if is_root {
                    gathered(&mut touch, Some(self.root));
                }
            }
            Shape::Scatter => {
                if is_root {
                    touch(self.send, all, Mode::Read);
                }
                let own = self.send + self.root.max(0) as u64 * block;
                if !(is_root && own == self.recv) {
                    touch(self.recv, Some(block), Mode::Write);
                }
            }
            Shape::Send => touch(self.send, Some(block), Mode::Read),
            Shape::Recv => touch(self.recv, Some(block), Mode::Write),
        }
        accesses
    }

    /// Queues it in the model's batch as an operation on its stream, with its accesses, as a
    /// launch is: told at once, a collective first told every launch queued before it on
    /// the program's thread (DDP all-reduces its gradient buckets in the middle of the
    /// backward pass's launches).
    fn issue(&self) {
        let needs_ranks = !matches!(self.shape, Shape::AllReduce | Shape::Send | Shape::Recv);
        let (rank, ranks) = if needs_ranks { (comm_user_rank(self.comm), comm_count(self.comm)) } else { (None, None) };
        let accesses = self.accesses(rank, ranks);
        let work = Work { origin: self.origin, kernel: None, accesses: &accesses, host: HostEffect::None };
        batch::queue(unsettled(), self.stream, work, Phase::Model);
    }
}

/// The calling thread's group: how deep, and the calls it holds until the outermost end.
#[derive(Default)]
struct Group {
    depth: u32,
    pending: Vec<Collective>,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

/// Whether NCCL took the call: done, or (non-blocking communicator) under way.
fn accepted(status: NcclResult) -> bool {
    status == NCCL_SUCCESS || status == NCCL_IN_PROGRESS
}

/// A collective's arguments by what they are, read from the table's argument names
/// (`argument!`); those a call does not take stay null or 0.
struct Args {
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: NcclComm,
    stream: CUstream,
}

impl Args {
    const NONE: Args = Args {
        send: core::ptr::null(),
        recv: core::ptr::null_mut(),
        count: 0,
        datatype: 0,
        root: 0,
        comm: core::ptr::null_mut(),
        stream: core::ptr::null_mut(),
    };
}

/// What an argument of the NCCL table is, by its name: `argument!(args, name value)`.
/// `op` and `peer` do not change what a call touches.
#[rustfmt::skip]
macro_rules! argument {
    ($args:ident, sendbuff $v:ident) => { $args.send = $v };
    ($args:ident, recvbuff $v:ident) => { $args.recv = $v };
    // `ncclBcast(buff, ...)` is `ncclBroadcast(buff, buff, ...)`.
    ($args:ident, buff $v:ident) => { ($args.send, $args.recv) = ($v, $v) };
    ($args:ident, count $v:ident) => { $args.count = $v };
    ($args:ident, sendcount $v:ident) => { $args.count = $v };
    ($args:ident, recvcount $v:ident) => { $args.count = $v };
    ($args:ident, datatype $v:ident) => { $args.datatype = $v };
    ($args:ident, root $v:ident) => { $args.root = $v };
    ($args:ident, comm $v:ident) => { $args.comm = $v };
    ($args:ident, stream $v:ident) => { $args.stream = $v };
    ($args:ident, op $v:ident) => {};
    ($args:ident, peer $v:ident) => {};
}

/// The shape of each family of the NCCL table that is a collective or point-to-point call.
#[rustfmt::skip]
macro_rules! shape {
    (all_reduce) => { Shape::AllReduce };
    (broadcast) => { Shape::Broadcast };
    (bcast) => { Shape::Broadcast };
    (reduce) => { Shape::Reduce };
    (all_gather) => { Shape::AllGather };
    (reduce_scatter) => { Shape::ReduceScatter };
    (all_to_all) => { Shape::AllToAll };
    (gather) => { Shape::Gather };
    (scatter) => { Shape::Scatter };
    (send) => { Shape::Send };
    (recv) => { Shape::Recv };
}

/// Expands the NCCL table into the handlers of its collective and point-to-point calls:
/// each calls NCCL, then, if NCCL accepted the call, has it issued ([`called`]). The group
/// calls' handlers are written out below.
macro_rules! define_handlers {
    ($( $family:ident [$name:ident] ($($arg:ident : $ty:ty),*); )*) => {
        $( define_handlers!(@family $family ($($arg : $ty),*)); )*
    };
    (@family group_start $args:tt) => {};
    (@family group_end $args:tt) => {};
    (@family $family:ident ($($arg:ident : $ty:ty),*)) => {
        pub unsafe fn $family(call: &NcclCall, real: real::$family, $($arg: $ty),*) -> NcclResult {
            // SAFETY: the caller's own arguments, passed on unchanged.
            let status = unsafe { real($($arg),*) };
            if accepted(status) {
                let mut args = Args::NONE;
                $( argument!(args, $arg $arg); )*
                called(call, shape!($family), &args);
            }
            status
        }
    };
}

nccl_api!(define_handlers);

/// A call NCCL accepted: issued now, or at the end of the thread's group.
fn called(call: &NcclCall, shape: Shape, args: &Args) {
    let Some(element) = datatype_size(args.datatype) else {
        return;
    };
    let collective = Collective {
        shape,
        origin: Origin { api: call.name(), thread: thread::current(), site: stack::capture() },
        send: args.send as u64,
        recv: args.recv as u64,
        count: args.count as u64,
        element,
        root: args.root,
        comm: args.comm,
        // NCCL's stream 0 is the legacy default stream: NCCL is built without per-thread
        // default streams, whatever the program was.
        stream: stream_of_handle(args.stream, false),
    };
    // Once the thread's storage is gone (exit handlers), no group is open.
    let in_group = GROUP.try_with(|group| group.borrow().depth > 0).unwrap_or(false);
    if in_group {
        GROUP.with(|group| group.borrow_mut().pending.push(collective));
    } else {
        collective.issue();
    }
}

pub unsafe fn group_start(_call: &NcclCall, real: real::group_start) -> NcclResult {
    let status = unsafe { real() };
    if accepted(status) {
        let _ = GROUP.try_with(|group| group.borrow_mut().depth += 1);
    }
    status
}

/// The outermost `ncclGroupEnd` issues the group's calls if NCCL launched them, and drops
/// them if it did not (NCCL aborts a failed group).
pub unsafe fn group_end(_call: &NcclCall, real: real::group_end) -> NcclResult {
    let status = unsafe { real() };
    let ended = GROUP.try_with(|group| {
        let mut group = group.borrow_mut();
        if group.depth == 0 {
            return Vec::new();
        }
        group.depth -= 1;
        if group.depth > 0 {
            Vec::new()
        } else {
            std::mem::take(&mut group.pending)
        }
    });
    if accepted(status) {
        for collective in ended.unwrap_or_default() {
            collective.issue();
        }
    }
    status
}

nccl_api!(export_nccl_hooks);

#[cfg(test)]
mod tests {
    use super::*;

    const SEND: u64 = 0x10_0000;
    const RECV: u64 = 0x20_0000;

    fn collective(shape: Shape, send: u64, recv: u64, root: c_int) -> Collective {
        Collective {
            shape,
            origin: Origin { api: "nccl", thread: Default::default(), site: Default::default() },
            send,
            recv,
            count: 16,
            element: 4,
            root,
            comm: core::ptr::null_mut(),
            stream: StreamRef::Handle(1),
        }
    }

    fn ranges(accesses: &[Access]) -> Vec<(u64, u64, Mode)> {
        accesses.iter().map(|a| (a.addr, a.len, a.mode)).collect()
    }

    #[test]
    fn an_all_reduce_reads_its_send_buffer_and_writes_its_receive_buffer() {
        let c = collective(Shape::AllReduce, SEND, RECV, 0);
        assert_eq!(ranges(&c.accesses(None, None)), [(SEND, 64, Mode::Read), (RECV, 64, Mode::Write)]);
    }

    #[test]
    fn an_all_gather_writes_every_rank_s_block() {
        let c = collective(Shape::AllGather, SEND, RECV, 0);
        assert_eq!(ranges(&c.accesses(Some(1), Some(4))), [(SEND, 64, Mode::Read), (RECV, 256, Mode::Write)]);
        // In place: rank 1's block is its send buffer, which NCCL does not write.
        let c = collective(Shape::AllGather, RECV + 64, RECV, 0);
        assert_eq!(
            ranges(&c.accesses(Some(1), Some(4))),
            [(RECV + 64, 64, Mode::Read), (RECV, 64, Mode::Write), (RECV + 128, 128, Mode::Write)]
        );
    }

    #[test]
    fn a_reduce_scatter_reads_every_rank_s_block() {
        let c = collective(Shape::ReduceScatter, SEND, RECV, 0);
        assert_eq!(ranges(&c.accesses(Some(0), Some(2))), [(SEND, 128, Mode::Read), (RECV, 64, Mode::Write)]);
    }

    #[test]
    fn a_broadcast_on_an_unknown_rank_writes_its_receive_buffer_unless_in_place() {
        let broadcast = collective(Shape::Broadcast, SEND, RECV, 1);
        assert_eq!(ranges(&broadcast.accesses(None, Some(2))), [(RECV, 64, Mode::Write)]);
        let in_place = collective(Shape::Broadcast, RECV, RECV, 1);
        assert_eq!(ranges(&in_place.accesses(None, Some(2))), []);
    }

    #[test]
    fn an_in_place_scatter_root_does_not_write_its_own_block() {
        // Root 1's block of the send buffer is its receive buffer.
        let scatter = collective(Shape::Scatter, SEND, SEND + 64, 1);
        assert_eq!(ranges(&scatter.accesses(Some(1), Some(2))), [(SEND, 128, Mode::Read)]);
    }

    #[test]
    fn rooted_calls_touch_what_each_rank_uses() {
        let broadcast = collective(Shape::Broadcast, SEND, RECV, 1);
        assert_eq!(ranges(&broadcast.accesses(Some(1), Some(2))), [(SEND, 64, Mode::Read), (RECV, 64, Mode::Write)]);
        assert_eq!(ranges(&broadcast.accesses(Some(0), Some(2))), [(RECV, 64, Mode::Write)]);
        let in_place = collective(Shape::Broadcast, RECV, RECV, 1);
        assert_eq!(ranges(&in_place.accesses(Some(1), Some(2))), [(RECV, 64, Mode::Read)]);
        let reduce = collective(Shape::Reduce, SEND, RECV, 1);
        assert_eq!(ranges(&reduce.accesses(Some(0), Some(2))), [(SEND, 64, Mode::Read)]);
        let scatter = collective(Shape::Scatter, SEND, RECV, 0);
        assert_eq!(ranges(&scatter.accesses(Some(0), Some(2))), [(SEND, 128, Mode::Read), (RECV, 64, Mode::Write)]);
        assert_eq!(ranges(&scatter.accesses(Some(1), Some(2))), [(RECV, 64, Mode::Write)]);
    }

    #[test]
    fn an_unknown_rank_count_leaves_the_sized_buffer_out() {
        let c = collective(Shape::AllToAll, SEND, RECV, 0);
        assert!(c.accesses(Some(0), None).is_empty());
    }
}
