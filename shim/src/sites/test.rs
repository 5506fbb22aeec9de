//! The test running, as the program names it (`streamsan_set_test`): a call made while a test
//! runs carries the test in its call site ([`super::stack`]), so that a race names the test
//! of each of its operations and races in two tests are two entries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::RwLock;

/// The test running: its number (from 1), or 0 for none.
static CURRENT: AtomicU32 = AtomicU32::new(0);

/// Tests by number (index 0: none) and numbers by name: a test run again keeps its number.
#[derive(Default)]
struct Names {
    by_number: Vec<String>,
    by_name: HashMap<String, u32>,
}

static NAMES: RwLock<Option<Names>> = RwLock::new(None);

/// From now on, calls are made in the test `name` (none for `None`).
pub fn set(name: Option<&str>) {
    let number = name.map_or(0, |name| {
        let mut names = NAMES.write().unwrap_or_else(|e| e.into_inner());
        let names = names.get_or_insert_with(|| Names { by_number: vec![String::new()], ..Names::default() });
        *names.by_name.entry(name.to_string()).or_insert_with(|| {
            names.by_number.push(name.to_string());
            (names.by_number.len() - 1) as u32
        })
    });
    CURRENT.store(number, Ordering::Relaxed);
}

/// The number of the test running (0: none).
#[inline]
pub fn current() -> u32 {
    CURRENT.load(Ordering::Relaxed)
}

/// The name of the test numbered `number`.
pub fn name(number: u32) -> Option<String> {
    let names = NAMES.read().unwrap_or_else(|e| e.into_inner());
    names.as_ref()?.by_number.get(number as usize).filter(|_| number != 0).cloned()
}
