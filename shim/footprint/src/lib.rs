//! The footprint engine: which bytes each kernel launch read, wrote and accessed atomically.
//!
//! streamsan's model needs, for every launch, the memory the kernel touches. A kernel's
//! parameters only hint at it (a pointer says where a buffer starts, not how much of it is
//! used, nor which way; a pointer inside a by-value structure says nothing). This engine
//! measures instead, on NVIDIA's Compute Sanitizer API, loaded at run time ([`api`]):
//! every module is patched on load so that each global-memory instruction calls a small
//! device function (`patch/footprint.cu`), which records into a table of the launch's own
//! ([`table`]) the granules it touched, aggregated per warp. The shim arms a launch before
//! calling the real driver ([`arm`]), takes its ticket after ([`outcome`]), and reads
//! the footprint once the program itself synchronized with the launch ([`collect`]).
//!
//! The engine knows nothing of the model or the shim; it hands out plain ranges.

mod api;
mod engine;
pub mod table;

pub use engine::{
    arm, collect, counters, discard, outcome, start, unpatch_quiet_modules, Ask, Counters, Driver, Outcome, Ticket,
    Unavailable, Unmeasured, REPATCHES, REPATCHES_FOR_NEW_KEYS,
};
pub use table::{Measured, Range};

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The checked-in patch was built from the source beside it (`patch/build.sh` records
    /// the source's sha256 when it builds).
    #[test]
    fn the_patch_is_built_from_the_current_source() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("patch");
        let recorded = std::fs::read_to_string(dir.join("footprint.fatbin.source-sha256")).expect("recorded sha256");
        let out =
            std::process::Command::new("sha256sum").arg(dir.join("footprint.cu")).output().expect("sha256sum runs");
        let actual = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_string();
        assert_eq!(
            recorded.trim(),
            actual,
            "patch/footprint.cu changed: run patch/build.sh and commit footprint.fatbin"
        );
    }
}
