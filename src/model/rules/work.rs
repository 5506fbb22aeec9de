//! Work: kernel launches, copies and memsets checked against the memory they touch
//! (`docs/semantics.md#accesses-and-races`).
//!
//! An operation is issued on its stream ([`super::issue`]) and each of its accesses is then
//! checked against the buffer it falls in: it must follow the buffer's allocation (else a
//! use before allocation), every earlier conflicting access (else a cross-stream race, the
//! hazard named by the two modes), and must not touch freed memory (a use after free). The
//! access is then recorded in the buffer's shadow. A kernel's pointer of unknown direction
//! gets its direction here, from what the model learnt ([`crate::model::direction`]). A
//! synchronous call orders the host before or after the operation, as its `HostEffect` says.

use crate::model::buffers::{Found, MemoryKind};
use crate::model::clock::{Epoch, VectorClock};
use crate::model::definition::NodeKind;
use crate::model::op::{Access, HostEffect, OpRecord};
use crate::model::race::{Action, BufferFacts, Hazard, Race, RaceKind, Side};
use crate::model::streams::StreamRef;
use crate::model::{Model, Work};

impl Model {
    /// A kernel launch, copy or memset on `stream`: each access is checked against the
    /// buffer's allocation and history, then recorded. While the stream captures, the work
    /// becomes a node instead. Returns the operation's epoch (None for a node).
    pub fn work(&self, stream: StreamRef, work: Work<'_>) -> Option<Epoch> {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Work { accesses: work.accesses.to_vec() }, &work.origin, work.kernel)
        {
            return None;
        }
        if work.host == HostEffect::WaitsForEarlierWork {
            self.host_joins(&stream);
        }
        let mut found = Vec::new();
        let (state, epoch) = self.issue(&stream);
        let op = OpRecord::new(&work.origin, work.kernel, epoch);
        for access in work.accesses {
            self.access(access, &state.clock, op, &mut found);
        }
        drop(state);
        if work.host == HostEffect::WaitsForOperation {
            self.host_joins(&stream);
        }
        self.publish(found);
        Some(epoch)
    }

    /// Checks and records one access by `op`, whose clock is `clock`.
    pub(super) fn access(&self, access: &Access, clock: &VectorClock, op: OpRecord, found: &mut Vec<Race>) {
        let end = access.addr.saturating_add(access.len.max(1));
        let mut addr = access.addr;
        // An access may span adjacent buffers (a copy over two): take each in turn.
        for _ in 0..8 {
            let next = self.buffers.with(addr, |buffer_at| match buffer_at {
                Found::Live(buffer) => {
                    let (lo, hi) = (addr, end.min(buffer.end()));
                    let mut state = buffer.lock();
                    // Host and managed memory may be written by the host, unseen: never fresh.
                    let device_only = !buffer.kind.is_host() && buffer.kind != MemoryKind::Managed;
                    let mode = self
                        .directions
                        .resolve(access.mode, op.kernel, access.slot, || device_only && state.shadow.untouched(lo, hi));
                    let this = Side { op, action: Action::Access { mode, lo, hi } };
                    let facts = || BufferFacts::of(buffer);
                    if !buffer.alloc.epoch.happens_before(clock) {
                        let alloc = Side { op: buffer.alloc, action: Action::Alloc };
                        found.push(Race {
                            kind: RaceKind::UseBeforeAlloc,
                            hazard: None,
                            buffer: facts(),
                            first: alloc,
                            second: this,
                        });
                    }
                    for earlier in state.shadow.conflicts(lo, hi, mode, op.epoch, clock) {
                        let first = Side {
                            op: earlier.op,
                            action: Action::Access { mode: earlier.mode, lo: earlier.lo, hi: earlier.hi },
                        };
                        let hazard = Hazard::between(earlier.mode, mode);
                        found.push(Race {
                            kind: RaceKind::CrossStream,
                            hazard: Some(hazard),
                            buffer: facts(),
                            first,
                            second: this,
                        });
                    }
                    state.shadow.record(lo, hi, mode, op, clock);
                    drop(state);
                    self.deferred.observe(lo, hi, mode, None, op, clock);
                    hi
                }
                Found::Freed(buffer) => {
                    if access.exact {
                        let hi = end.min(buffer.end());
                        let this = Side { op, action: Action::Access { mode: access.mode, lo: addr, hi } };
                        if let Some(free) = buffer.lock().freed {
                            let first = Side { op: free, action: Action::Free };
                            found.push(Race {
                                kind: RaceKind::UseAfterFree,
                                hazard: None,
                                buffer: BufferFacts::of(buffer),
                                first,
                                second: this,
                            });
                        }
                    }
                    buffer.end()
                }
                Found::Nothing => end,
            });
            if next >= end {
                return;
            }
            addr = next;
        }
    }
}
