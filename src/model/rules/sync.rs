//! Synchronization: events, stream and context synchronization, host functions and stream
//! memory operations (`docs/semantics.md#events`, `docs/semantics.md#synchronization`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::model::clock::VectorClock;
use crate::model::definition::{HostCallback, NodeKind};
use crate::model::events::EventState;
use crate::model::op::{Access, Mode, OpRecord, Origin};
use crate::model::race::NoteKind;
use crate::model::rules::work::Checked;
use crate::model::streams::{StreamKind, StreamRef};
use crate::model::Model;

use super::issue::{return_scratch, scratch};

impl Model {
    /// `cuEventRecord(E, S)`: `E.clock := C_S`. In a capture, E stands for the stream's
    /// frontier (and, recorded external, becomes a node).
    pub fn event_record(&self, event: u64, stream: StreamRef, external: bool, origin: &Origin) {
        let stream = self.stream(stream);
        if stream.capturing.load(Ordering::Acquire) {
            let capture = {
                let state = stream.lock();
                state.capture.as_ref().map(|lane| (lane.capture.clone(), lane.frontier.clone()))
            };
            if let Some((capture, nodes)) = capture {
                if external {
                    self.capture_node(&stream, || NodeKind::RecordEvent { event }, origin, None);
                }
                self.events.with(event, |e| *e.lock() = EventState::Captured { capture, nodes });
                return;
            }
        }
        let (state, _) = self.issue(&stream);
        self.events.with(event, |e| match &mut *e.lock() {
            EventState::Recorded(clock) => clock.assign(&state.clock),
            other => *other = EventState::Recorded(state.clock.clone()),
        });
    }

    /// `cuStreamWaitEvent(S, E)`: `C_S ⊔= E.clock`; a no-op (and a note) if E was never
    /// recorded; in a capture, S joins the capture (fork) or merges E's nodes (join), and a
    /// wait on an event recorded outside the capture, or not yet, becomes a node.
    pub fn stream_wait_event(&self, stream: StreamRef, event: u64, origin: &Origin) {
        let stream = self.stream(stream);
        // A recorded clock is copied into the thread's scratch clock (no allocation; the
        // state keeps an empty placeholder), and the event unlocked before the stream is
        // locked: a record takes the two locks the other way round.
        let mut recorded = scratch();
        let state = self.events.with(event, |e| match &*e.lock() {
            EventState::Recorded(clock) => {
                recorded.assign(clock);
                EventState::Recorded(VectorClock::new())
            }
            other => other.clone(),
        });
        match state {
            // In a capture, a wait on an event recorded outside it (NCCL's strong streams wait
            // on their serial event with `cudaEventWaitExternal`) is a node that joins the
            // event as it is at each launch: it may be recorded by then.
            EventState::Unrecorded | EventState::Recorded(_)
                if self.capture_node(&stream, || NodeKind::WaitEvent { event }, origin, None) => {}
            // The same for an event recorded in another capture (its graph's external event
            // record node: Warp's `record_event(external=True)`). The driver takes such a
            // wait only with `CU_EVENT_WAIT_EXTERNAL`: at each launch it waits for the
            // event's last record then, not for the other capture's nodes.
            EventState::Captured { ref capture, .. }
                if !stream.captures_into(capture)
                    && self.capture_node(&stream, || NodeKind::WaitEvent { event }, origin, None) => {}
            EventState::Unrecorded => {
                let epoch = self.issue_only(&stream);
                self.notes.add(NoteKind::WaitOnUnrecordedEvent, OpRecord::new(origin, None, epoch), event);
            }
            EventState::Captured { capture, nodes } => self.join_capture(&stream, capture, nodes),
            EventState::Recorded(_) => {
                let (mut state, _) = self.issue(&stream);
                state.clock.join(&recorded);
                stream.changed();
            }
        }
        return_scratch(recorded);
    }

    /// `cuEventSynchronize(E)`, or `cuEventQuery(E)` returning success: `H ⊔= E.clock`.
    pub fn event_synchronized(&self, event: u64) {
        self.events.with(event, |e| {
            if let EventState::Recorded(clock) = &*e.lock() {
                self.host.join(clock);
            }
        });
    }

    pub fn event_destroyed(&self, event: u64) {
        self.events.remove(event);
    }

    /// `cuStreamSynchronize(S)`, or `cuStreamQuery(S)` returning success: `H ⊔= C_S`. The
    /// legacy stream's synchronize is an action on it, which waits for every blocking stream
    /// first: it is issued there as an operation touching nothing, then joined.
    pub fn stream_synchronized(&self, stream: StreamRef) {
        let stream = self.stream(stream);
        if stream.kind == StreamKind::LegacyDefault {
            self.issue_only(&stream);
        }
        self.host_joins(&stream);
    }

    /// `cuCtxSynchronize`: `H ⊔= C_S` for every stream of the context.
    pub fn context_synchronized(&self, ctx: u64) {
        self.streams.host_waits_for_context(ctx, &self.host);
    }

    /// `cuLaunchHostFunc`, `cuStreamAddCallback`: an operation on the stream with no device
    /// access. The returned callback carries its clock; call [`Model::host_func_ran`] when
    /// the function runs.
    pub fn host_func(&self, stream: StreamRef, origin: &Origin) -> Arc<HostCallback> {
        let stream = self.stream(stream);
        let callback = Arc::new(HostCallback::default());
        if self.capture_node(&stream, || NodeKind::HostFunc(callback.clone()), origin, None) {
            callback.mark_captured();
            return callback;
        }
        let (state, _) = self.issue(&stream);
        callback.set(&state.clock);
        callback
    }

    /// A host function ran: the host is ordered after what preceded it on its stream.
    pub fn host_func_ran(&self, callback: &HostCallback) {
        self.host.join(&callback.clock());
    }

    /// `cuStreamWriteValue32/64`: a write of `len` bytes at `addr`, remembered for waits.
    pub fn write_value(&self, stream: StreamRef, addr: u64, len: u64, origin: &Origin) {
        let stream = self.stream(stream);
        let access = [Access::new(addr, len, Mode::Write)];
        if self.capture_node(&stream, || NodeKind::Work { accesses: access.to_vec() }, origin, None) {
            return;
        }
        let mut found = Vec::new();
        let (state, epoch) = self.issue(&stream);
        self.access(&access[0], &state.clock, OpRecord::new(origin, None, epoch), Checked::Now, &mut found);
        self.values.insert(addr, state.clock.clone());
        drop(state);
        self.publish(found);
    }

    /// `cuStreamWaitValue32/64`: `C_S ⊔=` the clock of the last write to `addr`.
    pub fn wait_value(&self, stream: StreamRef, addr: u64, origin: &Origin) {
        let stream = self.stream(stream);
        if self.capture_node(&stream, || NodeKind::Empty, origin, None) {
            return;
        }
        let written = self.values.get(&addr).map(|c| c.clone());
        let (mut state, _) = self.issue(&stream);
        if let Some(clock) = written {
            state.clock.join(&clock);
            stream.changed();
        }
    }
}
