//! A module's variables in its twin: before a launch on the twin, the twin's copies take the
//! program's values, and after it, the bytes the launch changed go back. A kernel of the
//! engine's (`copy_variables.ptx`, one per context) does this for the writable ones, up to
//! [`PER_LAUNCH`] in one launch, against a snapshot of the bytes as they were when program
//! and twin last agreed: a byte the twin's kernel did not write is never written back (a
//! measured launch on another stream, or a kernel of the program's, may be writing it). The
//! driver takes tens of microseconds per copy of a module variable, and a module may hold
//! dozens (CCCL's one-byte tag objects): it copies only constants (a kernel may not write
//! constant memory), and everything, back and forth, where the copier could not be loaded or
//! launched.

use core::ffi::c_void;

use crate::api::Handle;
use crate::driver::Driver;
use crate::loads::{self, Load};

/// The copier's code, NUL-terminated as the driver takes PTX text.
const COPIER: &str = concat!(include_str!("copy_variables.ptx"), "\0");

/// Variables one launch of the copier copies at most: its parameter block (3,848 bytes)
/// stays within the 4 KiB every driver takes.
pub const PER_LAUNCH: usize = 120;

/// Threads per block of the copier: one block per variable.
const THREADS: u32 = 256;

/// A variable in the program's module and in the twin.
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    pub own: u64,
    pub twin: u64,
    pub bytes: usize,
    /// Whether kernels may write it (not constant memory).
    pub writable: bool,
}

/// The copier's parameters for up to [`PER_LAUNCH`] writable variables, laid out as its
/// `.entry` declares them after `count` and `back`: each entry the program's address, the
/// twin's, the snapshot's, the size.
#[derive(Debug)]
struct Launch {
    count: u32,
    entries: Box<[[u64; 4]; PER_LAUNCH]>,
}

/// A module's variables, its writable ones as the copier's launches, and where their
/// snapshot lies (device memory of the engine's, `snapshot_bytes` long; 0: none).
#[derive(Debug, Default)]
pub struct Variables {
    all: Vec<Variable>,
    launches: Vec<Launch>,
    pub snapshot: u64,
}

impl Variables {
    /// `all`, their writable ones' snapshot at `snapshot` ([`snapshot`]; 0: none).
    pub fn new(all: Vec<Variable>, snapshot: u64) -> Variables {
        let mut at = snapshot;
        let writable: Vec<[u64; 4]> = all
            .iter()
            .filter(|v| v.writable)
            .map(|v| {
                at += v.bytes as u64;
                [v.own, v.twin, at - v.bytes as u64, v.bytes as u64]
            })
            .collect();
        let launches = if snapshot == 0 {
            Vec::new()
        } else {
            writable
                .chunks(PER_LAUNCH)
                .map(|chunk| {
                    let mut entries = Box::new([[0u64; 4]; PER_LAUNCH]);
                    entries[..chunk.len()].copy_from_slice(chunk);
                    Launch { count: chunk.len() as u32, entries }
                })
                .collect()
        };
        Variables { all, launches, snapshot }
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

/// Bytes of the snapshot of `all`'s writable variables.
fn snapshot_bytes(all: &[Variable]) -> usize {
    all.iter().filter(|v| v.writable).map(|v| v.bytes).sum()
}

/// A snapshot for the writable variables of a twin just loaded, `all`: memory of the
/// engine's, zeroed, and the twin's writable variables zeroed too, so that the two agree
/// before any copier runs on any stream. Made on a stream of its own, waited for (the twin
/// is in no program's use yet). 0 where there are none, or the driver refused.
pub fn snapshot(driver: &Driver, all: &[Variable]) -> u64 {
    let bytes = snapshot_bytes(all);
    let (mut snapshot, mut stream): (u64, Handle) = (0, core::ptr::null_mut());
    // SAFETY: real driver functions, valid out-pointers; CU_STREAM_NON_BLOCKING: the stream
    // waits on none of the program's.
    if bytes == 0
        || unsafe { (driver.mem_alloc)(&mut snapshot, bytes) } != 0
        || unsafe { (driver.stream_create)(&mut stream, 1) } != 0
    {
        if snapshot != 0 {
            // SAFETY: the memory just allocated, used by nothing.
            unsafe { (driver.mem_free)(snapshot) };
        }
        return 0;
    }
    let zeroed = core::iter::once((snapshot, bytes))
        .chain(all.iter().filter(|v| v.writable).map(|v| (v.twin, v.bytes)))
        // SAFETY: a real driver function, on memory of the engine's: the snapshot, the
        // twin's variables.
        .all(|(at, bytes)| unsafe { (driver.memset_d8_async)(at, 0, bytes, stream) } == 0);
    // SAFETY: the stream just made, given back once its memsets completed.
    let done = unsafe { (driver.stream_synchronize)(stream) } == 0;
    unsafe { (driver.stream_destroy)(stream) };
    if zeroed && done {
        return snapshot;
    }
    // SAFETY: as above; nothing uses it.
    unsafe { (driver.mem_free)(snapshot) };
    0
}

/// What copying a module's variables took: the variables, the copier's launches, the
/// driver's copies.
#[derive(Clone, Copy, Debug, Default)]
pub struct Copied {
    pub variables: u64,
    pub launches: u64,
    pub driver_copies: u64,
}

/// Loads the copier in the current context: its function, or None where the driver would
/// not compile or load it (PTX compilation turned off: the driver then copies every
/// variable). May wait for the device to drain, as any load.
pub fn load_copier(driver: &Driver) -> Option<Handle> {
    let mut module: Handle = core::ptr::null_mut();
    // SAFETY: a real driver function, a valid out-pointer, NUL-terminated PTX text that lives
    // for the process.
    let loaded =
        loads::during(Load::Copier, || unsafe { (driver.module_load_data)(&mut module, COPIER.as_ptr().cast()) }) == 0;
    if !loaded || module.is_null() {
        return None;
    }
    let mut function: Handle = core::ptr::null_mut();
    // SAFETY: as above, on the module just loaded; the name is NUL-terminated.
    let found = unsafe { (driver.module_get_function)(&mut function, module, c"streamsan_copy_variables".as_ptr()) };
    (found == 0 && !function.is_null()).then_some(function)
}

/// Copies `variables` into the twin (`into_twin`) or, those kernels may write, back to the
/// program's module, on `stream` (the launch's, so ordered with it): the writable ones by
/// `copier` where there is one, the variables have a snapshot, and the driver takes its
/// launches. None where the driver refused a copy.
pub fn copy(
    driver: &Driver,
    copier: Option<Handle>,
    variables: &Variables,
    stream: Handle,
    into_twin: bool,
) -> Option<Copied> {
    let mut copied = Copied::default();
    let mut back = u32::from(!into_twin);
    let by_copier = copier.is_some_and(|f| {
        !variables.launches.is_empty()
            && variables.launches.iter().all(|launch| {
                let mut count = launch.count;
                let mut params: [*mut c_void; 3] =
                    [(&raw mut count).cast(), (&raw mut back).cast(), launch.entries.as_ptr().cast_mut().cast()];
                // SAFETY: a real driver function; the copier's three parameters, each pointing
                // at its value, live across the call (the driver copies them at launch); every
                // variable and its snapshot is live, of its size.
                let status = unsafe {
                    (driver.launch_kernel)(
                        f,
                        count,
                        1,
                        1,
                        THREADS,
                        1,
                        1,
                        0,
                        stream,
                        params.as_mut_ptr(),
                        core::ptr::null_mut(),
                    )
                };
                copied.launches += u64::from(status == 0);
                status == 0
            })
    });
    for v in &variables.all {
        let (to, from) = if into_twin { (v.twin, v.own) } else { (v.own, v.twin) };
        if v.writable && by_copier {
            copied.variables += 1;
            continue;
        }
        if !v.writable && !into_twin {
            continue;
        }
        // SAFETY: a real driver function; both variables are live, of `bytes` each.
        if unsafe { (driver.memcpy_dtod_async)(to, from, v.bytes, stream) } != 0 {
            return None;
        }
        copied.variables += 1;
        copied.driver_copies += 1;
    }
    Some(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_variables_are_the_copiers_in_launches_of_at_most_its_entries() {
        let variable = |i: u64, writable| Variable { own: 0x1000 + i, twin: 0x2000 + i, bytes: 1, writable };
        let all: Vec<Variable> =
            [variable(999, false)].into_iter().chain((0..PER_LAUNCH as u64 + 2).map(|i| variable(i, true))).collect();
        assert_eq!(snapshot_bytes(&all), PER_LAUNCH + 2, "a snapshot byte per writable byte");
        let v = Variables::new(all, 0x9000);
        let counts: Vec<u32> = v.launches.iter().map(|l| l.count).collect();
        assert_eq!(counts, [PER_LAUNCH as u32, 2]);
        let last = PER_LAUNCH as u64 + 1;
        assert_eq!(v.launches[1].entries[1], [0x1000 + last, 0x2000 + last, 0x9000 + last, 1]);
        assert!(Variables::new(vec![variable(0, true)], 0).launches.is_empty(), "no snapshot, no copier");
    }

    #[test]
    fn the_copiers_parameter_block_is_the_one_its_code_declares() {
        let declared = format!(".param .align 8 .b8 entries[{}]", PER_LAUNCH * 32);
        assert!(COPIER.contains(&declared), "copy_variables.ptx must declare {declared}");
        assert!(COPIER.contains(".entry streamsan_copy_variables("));
    }
}
