//! The vocabulary in which the shim describes an intercepted call to the model.

use super::clock::{Epoch, VectorClock};

/// A call site: an index into the shim's stack depot (0: unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

/// A host thread, numbered by the shim from 1 in the order threads first call the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(pub u32);

/// A kernel name interned by [`crate::model::Model::kernel_id`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelId(pub u32);

/// Whether a kernel's code waits on its grid dependencies (`griddepcontrol.wait`), as far as
/// it was read: a programmatic launch of a kernel that never waits overlaps the kernel it
/// follows; one of a kernel that waits overlaps it with its accesses before the wait
/// (`docs/semantics.md#programmatic-dependent-launch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GridWait {
    /// Its code holds no wait.
    Never,
    /// It waits somewhere, or its code is not known: its accesses measured before its first
    /// wait ([`WaitPlace::Before`]) overlap the kernel it follows, the others are ordered
    /// after it, and a launch with an access whose place is not known is noted.
    #[default]
    Unseen,
}

/// Where a kernel's access lies around its first grid-dependency wait, in its code: what the
/// footprint patch saw, where it was told where the wait is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitPlace {
    /// Not known: not measured (a parameter's pointer, a copy), or measured in code whose
    /// wait was not found.
    #[default]
    Unknown,
    /// Made by an instruction of the kernel before its first wait.
    Before,
    /// Made by an instruction after it, or in a function the kernel calls.
    After,
}

/// How a launch's accesses are ordered after the kernel ahead of it
/// (`Model::overlapping`).
#[derive(Clone, Debug)]
pub(in crate::model) enum Overlap {
    /// Not a programmatic launch, or one of a kernel that never waits ordered after that
    /// kernel anyway: every access with its own clock.
    None,
    /// A programmatic launch of a kernel that never waits: every access with this clock.
    Whole(VectorClock),
    /// A programmatic launch of a kernel that waits: its accesses before the wait with this
    /// clock, the others with its own.
    BeforeWait(VectorClock),
}

impl Overlap {
    /// How a programmatic launch of a kernel with `wait` is ordered after the kernels ahead
    /// of it: `beside` is its clock but for those kernels where they are not ordered before
    /// it another way (None: they are), `ordered` its own. A kernel that never waits runs
    /// beside them until the end; one that waits, until its wait (and with no kernel beside,
    /// its accesses of unknown place are still noted).
    pub(in crate::model) fn of(wait: GridWait, beside: Option<VectorClock>, ordered: &VectorClock) -> Overlap {
        match (wait, beside) {
            (GridWait::Never, Some(beside)) => Overlap::Whole(beside),
            (GridWait::Never, None) => Overlap::None,
            (GridWait::Unseen, beside) => Overlap::BeforeWait(beside.unwrap_or_else(|| ordered.clone())),
        }
    }

    /// The clock `access` is checked with, `ordered` the launch's own.
    pub(in crate::model) fn clock<'a>(&'a self, access: &Access, ordered: &'a VectorClock) -> &'a VectorClock {
        match self {
            Overlap::Whole(clock) => clock,
            Overlap::BeforeWait(clock) if access.place == WaitPlace::Before => clock,
            _ => ordered,
        }
    }
}

/// Who issued a call, and where from.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// The exported name the program called, e.g. `cuMemcpyHtoDAsync_v2_ptsz`.
    pub api: &'static str,
    pub thread: ThreadId,
    pub site: StackId,
}

#[cfg(test)]
impl Origin {
    /// A call of `api` from call site `site` on thread 1: the model's unit tests' operations.
    pub fn test(api: &'static str, site: u32) -> Origin {
        Origin { api, thread: ThreadId(1), site: StackId(site) }
    }
}

/// How an operation touches memory (named in kebab case where it is written out: the
/// accesses processes sharing memory publish to each other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Read,
    Write,
    /// A kernel's pointer parameter not declared pointer-to-const: it may write.
    ReadWrite,
    /// A kernel's pointer whose parameter types say nothing (an `extern "C"` kernel, a
    /// pointer inside a by-value structure): it may read or write.
    Unknown,
    /// A measured atomic read-modify-write: atomics of two streams on the same bytes are
    /// not a race, an atomic and a plain access are.
    Atomic,
}

impl Mode {
    /// Whether the access may write.
    pub fn writes(self) -> bool {
        !matches!(self, Mode::Read)
    }

    /// Whether two accesses of these modes to the same bytes, unordered, are a race. Two
    /// unknown accesses are not: both may be reads (kernels on two streams reading a shared
    /// input are common and correct), and nothing says otherwise.
    pub fn conflicts_with(self, other: Mode) -> bool {
        (self.writes() || other.writes())
            && !(self == Mode::Unknown && other == Mode::Unknown)
            && !(self == Mode::Atomic && other == Mode::Atomic)
    }
}

/// One memory access of an operation: `len` bytes at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub addr: u64,
    pub len: u64,
    pub mode: Mode,
    /// Whether an address in freed memory is certainly a use of it. False for a word inside
    /// a by-value kernel parameter, which may be a stale field the kernel never follows.
    pub exact: bool,
    /// For a kernel's pointer, its byte offset in the kernel's parameters: where the model
    /// learns the direction of pointers of unknown direction ([`super::direction`]).
    pub slot: Option<u32>,
    /// Which of its bytes it touched, modulo 256 ([`super::residue`]): a measured range's
    /// gaps; [`super::residue::DENSE`] for every other access.
    pub residues: u64,
    /// A word of a by-value parameter shaped as a `CUtensorMap` (128 bytes, 64-byte aligned):
    /// what a bulk tensor copy reaches through it, the footprint patch cannot see, so a
    /// measured launch keeps this guess.
    pub blind: bool,
    /// Where it lies around its kernel's first grid-dependency wait.
    pub place: WaitPlace,
}

impl Access {
    pub fn new(addr: u64, len: u64, mode: Mode) -> Access {
        Access {
            addr,
            len,
            mode,
            exact: true,
            slot: None,
            residues: super::residue::DENSE,
            blind: false,
            place: WaitPlace::Unknown,
        }
    }

    /// A word of a by-value parameter, at byte `slot` of the parameters, that points where
    /// buffers lie: of unknown direction, and no certain use of freed memory (a field may be
    /// stale).
    pub fn field(addr: u64, slot: u32) -> Access {
        Access { exact: false, slot: Some(slot), ..Access::new(addr, 1, Mode::Unknown) }
    }
}

/// What the model keeps of an operation so that a report can name it. The epoch first: the
/// checks read only it ([`super::buffers::Buffer`] keeps it beside the fields they read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct OpRecord {
    /// Its epoch; the slot says which stream (or graph lane) it ran on.
    pub epoch: Epoch,
    pub api: &'static str,
    pub kernel: Option<KernelId>,
    pub thread: ThreadId,
    pub site: StackId,
}

impl OpRecord {
    pub fn new(origin: &Origin, kernel: Option<KernelId>, epoch: Epoch) -> OpRecord {
        OpRecord { api: origin.api, kernel, epoch, thread: origin.thread, site: origin.site }
    }
}

/// How a synchronous call orders the host (`docs/semantics.md#copies`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostEffect {
    /// Asynchronous: the host does not wait.
    #[default]
    None,
    /// The stream's earlier work completes before the call starts (a copy from pageable
    /// host memory), but the call may return before the operation itself completes.
    WaitsForEarlierWork,
    /// The host waits for the operation itself.
    WaitsForOperation,
}

#[cfg(test)]
mod tests {
    use super::Mode::*;

    #[test]
    fn atomics_conflict_with_every_access_but_atomics() {
        for other in [Read, Write, ReadWrite, Unknown] {
            assert!(Atomic.conflicts_with(other) && other.conflicts_with(Atomic), "{other:?}");
        }
        assert!(!Atomic.conflicts_with(Atomic));
    }
}
