//! Streams and contexts created and destroyed (`docs/semantics.md#streams-and-default-streams`):
//! a destroyed stream's work still runs, and its slot is retired once the host has waited for it.

use crate::model::clock::Epoch;
use crate::model::op::{OpRecord, Origin};
use crate::model::race::NoteKind;
use crate::model::Model;

impl Model {
    pub fn stream_created(&self, handle: u64, ctx: u64, non_blocking: bool, origin: &Origin) {
        self.streams.created(handle, ctx, non_blocking, origin.site, origin.thread);
    }

    /// `cuStreamDestroy`: the handle is gone; pending work still completes (a note).
    pub fn stream_destroyed(&self, handle: u64, origin: &Origin) {
        let Some(stream) = self.streams.destroyed(handle) else { return };
        let last = stream.lock().clock.get(stream.slot);
        if last > self.host.get(stream.slot) {
            let op = OpRecord::new(origin, None, Epoch::new(stream.slot, last));
            self.notes.add(NoteKind::DestroyedWhilePending, op, handle);
        }
        self.streams.retire_if_done(&stream, &self.host);
    }

    /// A context destroyed or reset: its work is done, its streams and memory are gone.
    pub fn context_destroyed(&self, ctx: u64) {
        self.streams.remove_context(ctx, &self.host);
        self.buffers.remove_context(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::op::{Access, HostEffect, Mode};
    use crate::model::streams::StreamRef;
    use crate::model::Work;

    fn origin(api: &'static str) -> Origin {
        Origin::test(api, 1)
    }

    /// Destroys a stream that did some work, after a synchronize of it or not: the notes.
    fn destroy(synchronized: bool) -> usize {
        let model = Model::default();
        model.stream_created(0x10, 1, true, &origin("cuStreamCreate"));
        let access = [Access::new(0x1000, 8, Mode::Write)];
        let work = Work { origin: origin("cuMemsetD8Async"), kernel: None, accesses: &access, host: HostEffect::None };
        model.work(StreamRef::Handle(0x10), work);
        if synchronized {
            model.stream_synchronized(StreamRef::Handle(0x10));
        }
        model.stream_destroyed(0x10, &origin("cuStreamDestroy"));
        model.notes().iter().filter(|n| n.kind == NoteKind::DestroyedWhilePending).count()
    }

    #[test]
    fn a_stream_destroyed_with_work_pending_is_noted_and_one_waited_for_is_not() {
        assert_eq!(destroy(false), 1);
        assert_eq!(destroy(true), 0);
    }
}
