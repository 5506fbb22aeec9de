//! Events: what a record captured, for the streams and hosts that wait on it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::hash::{fast_map, FastMap};
use crate::thread_cache::ThreadCache;

use super::capture::Capture;
use super::clock::VectorClock;
use super::lock::{Guard, Lock};

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
    state: Lock<EventState>,
}

impl Event {
    pub fn lock(&self) -> Guard<'_, EventState> {
        self.state.lock()
    }
}

/// Every event, by handle; an event first seen in a record or wait is created then.
pub struct Events {
    map: FastMap<u64, Arc<Event>>,
    /// Tells this table's entries in [`RECENT`] from another table's.
    id: u64,
}

/// Bumped whenever a handle may come to mean another event (one destroyed) and whenever a
/// table is made: a thread's [`RECENT`] entries of an older generation are not used.
static GENERATION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The events this thread used lately, by (table, handle) ([`crate::thread_cache`]): a record
    /// and a wait per step, on the same few events.
    static RECENT: RefCell<ThreadCache<(u64, u64), Arc<Event>, 64>> = RefCell::new(ThreadCache::default());
}

fn new_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::AcqRel) + 1
}

impl Default for Events {
    fn default() -> Self {
        Events { map: fast_map(), id: new_generation() }
    }
}

impl Events {
    /// Calls `f` with the event `handle` names (created on first use), borrowed from the
    /// thread's memory when it used the event lately: no shared lock, no reference count.
    #[inline]
    pub fn with<R>(&self, handle: u64, f: impl FnOnce(&Event) -> R) -> R {
        let generation = GENERATION.load(Ordering::Acquire);
        let key = (self.id, handle);
        let mut f = Some(f);
        let cached = RECENT.try_with(|recent| {
            let recent = recent.try_borrow().ok()?;
            let event = recent.get(&key, generation)?;
            Some((f.take()?)(event))
        });
        if let Ok(Some(result)) = cached {
            return result;
        }
        let event = match self.map.get(&handle) {
            Some(e) => e.clone(),
            None => self.map.entry(handle).or_default().clone(),
        };
        let result = (f.take().expect("not called yet"))(&event);
        let _ = RECENT.try_with(|recent| {
            if let Ok(mut recent) = recent.try_borrow_mut() {
                recent.put(key, generation, event);
            }
        });
        result
    }

    /// Forgets a destroyed event (its handle may be reused).
    pub fn remove(&self, handle: u64) {
        self.map.remove(&handle);
        // After the change: a lookup that raced with it is cached under the old generation.
        new_generation();
    }
}
