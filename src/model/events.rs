//! Events: what a record captured, for the streams and hosts that wait on it.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::hash::FastMap;

use super::capture::Capture;
use super::clock::VectorClock;

/// What an event holds.
#[derive(Clone, Default)]
pub enum EventState {
    /// Never recorded: waiting on it orders nothing.
    #[default]
    Unrecorded,
    /// Recorded on a stream: a snapshot of that stream's clock (re-recording replaces it).
    Recorded(VectorClock),
    /// Recorded on a capturing stream: the capture's nodes it stands for.
    Captured { capture: Arc<Capture>, nodes: Vec<usize> },
}

#[derive(Default)]
pub struct Event {
    state: Mutex<EventState>,
}

impl Event {
    pub fn lock(&self) -> MutexGuard<'_, EventState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Every event, by handle; an event first seen in a record or wait is created then.
#[derive(Default)]
pub struct Events {
    map: FastMap<u64, Arc<Event>>,
}

impl Events {
    pub fn get(&self, handle: u64) -> Arc<Event> {
        if let Some(e) = self.map.get(&handle) {
            return e.clone();
        }
        self.map.entry(handle).or_default().clone()
    }

    /// Forgets a destroyed event (its handle may be reused).
    pub fn remove(&self, handle: u64) -> Option<Arc<Event>> {
        self.map.remove(&handle).map(|(_, e)| e)
    }
}
