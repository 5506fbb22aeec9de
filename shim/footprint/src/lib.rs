//! The footprint engine: which bytes each kernel launch read, wrote and accessed atomically,
//! measured by a device patch on every global-memory instruction of a twin of the kernel's
//! module ([`twins`]), through NVIDIA's Compute Sanitizer API loaded at run time ([`api`]).
//! It knows nothing of the model or the shim: it hands out plain ranges. Beside it, [`channels`]
//! reads a PTX image for the parameters through which its kernels talk to the host.

mod api;
pub mod channels;
mod driver;
mod engine;
mod grid_waits;
mod image;
mod loads;
mod module_state;
mod nodes;
mod patch;
pub mod table;
mod twins;
mod variables;

pub use driver::Driver as TwinDriver;
pub use engine::{
    arm, collect, counters, discard, outcome, start, waits_for_grid, Counters, Driver, Outcome, Ticket, Unavailable,
    Unmeasured,
};
pub use nodes::{arm_nodes, NodeArmed, NodesArmed};
pub use table::{Measured, Range};
pub use twins::NoTwin;

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
