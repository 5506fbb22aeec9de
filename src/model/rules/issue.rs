//! The issue rule, which every other rule goes through: how an operation is placed on a
//! stream, or becomes a node while the stream captures (`docs/semantics.md#issuing-an-operation`).

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::model::clock::{Epoch, VectorClock};
use crate::model::definition::{Node, NodeKind};
use crate::model::lock;
use crate::model::op::{KernelId, Origin};
use crate::model::streams::{self, Stream, StreamRef, StreamState};
use crate::model::Model;

thread_local! {
    /// A clock to gather into, reused so that the launch path does not allocate.
    static SCRATCH: Cell<Option<VectorClock>> = const { Cell::new(None) };
}

/// A cleared clock: the thread's reused one, or a new one once the thread's storage is gone
/// (a program's exit handlers may still call the driver).
pub(super) fn scratch() -> VectorClock {
    let mut clock = SCRATCH.try_with(|s| s.take()).ok().flatten().unwrap_or_default();
    clock.clear();
    clock
}

/// Gives a clock from [`scratch`] back to the thread for its next use.
pub(super) fn return_scratch(clock: VectorClock) {
    let _ = SCRATCH.try_with(|s| s.set(Some(clock)));
}

impl Model {
    /// The stream a handle or default-stream name stands for, made on first sight.
    pub(in crate::model) fn stream(&self, key: StreamRef) -> Arc<Stream> {
        self.streams.resolve(key, &*self.describe)
    }

    /// Issues an operation on `stream` (`docs/semantics.md#issuing-an-operation`):
    /// `C_S ⊔= H`; for the legacy stream, `C_L ⊔=` every blocking stream of the context; for
    /// a blocking stream, `C_S ⊔= C_L`; then `C_S[S] += 1`. Returns the stream's locked
    /// state and the operation's epoch. Clocks of other streams are gathered before the
    /// stream's own lock is taken.
    pub(in crate::model) fn issue<'s>(&self, stream: &'s Stream) -> (lock::Guard<'s, StreamState>, Epoch) {
        // Only what changed since this stream last looked is joined; on the common path (a
        // non-blocking stream, the host unchanged) nothing is.
        let host_version = self.host.version.load(Ordering::Acquire);
        let host = (stream.host_seen.load(Ordering::Relaxed) != host_version).then(|| self.host.current());
        let mut incoming = None;
        let mut legacy_version = None;
        // The legacy stream joins the blocking streams that changed, if any did: those queued
        // on it since it last looked, marked joined once their clocks are in the legacy clock.
        let members = match stream.kind {
            streams::StreamKind::LegacyDefault if stream.take_blocking_changes() => {
                Some(stream.take_changed_blocking())
            }
            _ => None,
        };
        let mut joined = Vec::new();
        if let Some(members) = &members {
            let mut clock = scratch();
            Stream::join_blocking_into(members, &mut clock, &mut joined);
            incoming = Some(clock);
        } else if let Some(legacy) = &stream.legacy {
            let version = legacy.version.load(Ordering::Acquire);
            if stream.legacy_seen.load(Ordering::Relaxed) != version {
                let mut clock = scratch();
                legacy.join_into(&mut clock);
                incoming = Some(clock);
                legacy_version = Some(version);
            }
        }
        let mut state = stream.lock();
        if let Some(host) = &host {
            state.clock.join_host(host);
            stream.host_seen.store(host_version, Ordering::Relaxed);
        }
        if let Some(clock) = incoming {
            state.clock.join(&clock);
            return_scratch(clock);
        }
        if let Some(version) = legacy_version {
            stream.legacy_seen.store(version, Ordering::Relaxed);
        }
        if let Some(members) = &members {
            for &(i, version) in &joined {
                members[i].joined_by_legacy.store(version, Ordering::Relaxed);
            }
        }
        let epoch = state.clock.tick(stream.slot);
        stream.changed();
        (state, epoch)
    }

    /// Issues an operation that touches no memory; returns its epoch.
    pub(super) fn issue_only(&self, stream: &Stream) -> Epoch {
        let (state, epoch) = self.issue(stream);
        drop(state);
        epoch
    }

    /// `H ⊔= C_S`.
    pub(super) fn host_joins(&self, stream: &Stream) {
        let mut clock = scratch();
        stream.join_into(&mut clock);
        self.host.join(&clock);
        return_scratch(clock);
    }

    /// If `stream` is capturing, appends a node for the operation and returns true. A
    /// programmatic launch's node is reached from the stream's last nodes through
    /// programmatic edges, as stream capture makes them; another node, through those the
    /// program gave edge data for.
    pub(in crate::model) fn capture_node(
        &self,
        stream: &Stream,
        kind: impl FnOnce() -> NodeKind,
        origin: &Origin,
        kernel: Option<KernelId>,
    ) -> bool {
        if !stream.capturing.load(Ordering::Acquire) {
            return false;
        }
        let mut state = stream.lock();
        let StreamState { capture, programmatic_next, .. } = &mut *state;
        let Some(lane) = capture.as_mut() else { return false };
        let programmatic = programmatic_next.take().filter(|_| kernel.is_some());
        let deps = std::mem::take(&mut lane.frontier);
        let edges = std::mem::take(&mut lane.programmatic);
        let node = Node {
            handle: 0,
            lane: lane.lane,
            programmatic: if programmatic.is_some() { deps.clone() } else { edges },
            deps,
            kind: kind(),
            origin: *origin,
            kernel,
            grid_wait: programmatic.unwrap_or_default(),
        };
        let id = lane.capture.push(node);
        lane.frontier = vec![id];
        true
    }
}
