//! Frame policy: which frame of a call site is the program's own, as opposed to a library's,
//! CUDA's, or the runtime's. Suppressions (`race_top`), the one-line call sites of the text
//! report and the merging of reports all ask the same question, answered here once.

use std::path::Path;

use super::Frame;

/// Whether a frame belongs to a library rather than to the program: a dependency (cargo's
/// registry, Python's site-packages), a standard library, the C runtime, the system.
fn is_library(frame: &Frame) -> bool {
    const FILES: [&str; 5] = ["/.cargo/registry/", "/rustc/", "/site-packages/", "/dist-packages/", "/lib/python3"];
    const MODULES: [&str; 6] = ["libc.so", "libstdc++", "libgcc_s", "ld-linux", "libpthread", "libdl"];
    let file = frame.file.as_deref().unwrap_or("");
    let module = frame.module.as_deref().unwrap_or("");
    let module = module.rsplit('/').next().unwrap_or(module);
    FILES.iter().any(|part| file.contains(part))
        || file.starts_with("/usr/")
        || file.starts_with('<')
        || MODULES.iter().any(|m| module.starts_with(m))
}

/// Whether a frame is in CUDA's own libraries (runtime, driver, math libraries), which say
/// how the driver was reached, not who asked.
fn is_cuda_library(frame: &Frame) -> bool {
    const MODULES: [&str; 12] = [
        "libcuda.",
        "libcudart",
        "libcublas",
        "libcudnn",
        "libcufft",
        "libcurand",
        "libcusparse",
        "libcusolver",
        "libnccl",
        "libnvrtc",
        "libnvJitLink",
        "libstreamsan",
    ];
    let module = frame.module.as_deref().unwrap_or("");
    let module = module.rsplit('/').next().unwrap_or(module);
    MODULES.iter().any(|m| module.starts_with(m))
}

/// The frame that says where in the program's own code a call was made: the innermost
/// Python frame beside the script (under the directory of the outermost Python frame outside
/// libraries: a package put on `PYTHONPATH` or installed with `pip --target` is not in
/// `site-packages`, yet it is not the program), else the innermost Python frame outside
/// libraries, else the innermost native frame with a source file outside libraries, else
/// the innermost frame with a source file, else the innermost named frame outside CUDA's
/// libraries (a framework's function, when a thread of its own made the call), else the
/// innermost frame.
pub fn program_frame(site: &[Frame]) -> Option<&Frame> {
    let own = |f: &&Frame| f.file.is_some() && !is_library(f);
    let python = |f: &&Frame| f.module.as_deref() == Some(PYTHON_MODULE);
    let named_caller = |f: &&Frame| f.function.is_some() && !is_cuda_library(f);
    let script_dir =
        site.iter().rev().find(|f| python(f) && own(f)).and_then(|f| Path::new(f.file.as_deref()?).parent());
    let beside_script = |f: &&Frame| {
        python(f)
            && script_dir.is_some_and(|dir| f.file.as_deref().is_some_and(|file| Path::new(file).starts_with(dir)))
    };
    site.iter()
        .find(beside_script)
        .or_else(|| site.iter().find(|f| python(f) && own(f)))
        .or_else(|| site.iter().find(|f| python(f)))
        .or_else(|| site.iter().find(own))
        .or_else(|| site.iter().find(|f| f.file.is_some()))
        .or_else(|| site.iter().find(named_caller))
        .or(site.first())
}

/// The `module` of a Python frame.
pub const PYTHON_MODULE: &str = "python";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::text::describe_site;

    fn frame(function: &str, file: Option<&str>, module: Option<&str>) -> Frame {
        Frame {
            address: "0x0".into(),
            function: Some(function.into()),
            file: file.map(String::from),
            line: Some(1),
            module: module.map(String::from),
        }
    }

    #[test]
    fn libraries_are_known_by_their_files_or_their_modules() {
        let library = |file: Option<&str>, module: Option<&str>| is_library(&frame("f", file, module));
        assert!(library(Some("/root/.cargo/registry/src/x/cudarc/src/sys.rs"), None));
        assert!(library(Some("/usr/include/c++/12/bits/std_function.h"), None), "the system's sources");
        assert!(library(Some("<frozen runpy>"), Some(PYTHON_MODULE)), "Python's own frozen modules");
        assert!(library(None, Some("/lib/x86_64-linux-gnu/libc.so.6")), "the C runtime");
        assert!(!library(Some("/work/app/main.cpp"), Some("/work/app/app")));
        assert!(!library(None, Some("/work/app/libmine.so")));
    }

    /// A Python program started by a native host of its own: the script is the outermost
    /// *Python* frame of the program's, not the host's source.
    #[test]
    fn the_script_is_found_among_python_frames_only() {
        let site = [
            frame("helper", Some("/opt/pkgs/mylib/core.py"), Some(PYTHON_MODULE)),
            frame("train", Some("/work/app/train.py"), Some(PYTHON_MODULE)),
            frame("main", Some("/srv/host/main.c"), None),
        ];
        assert_eq!(program_frame(&site).unwrap().function.as_deref(), Some("train"));
        // Code compiled from a string with no file name has no directory to look beside:
        // still the program's Python frame, before a native one.
        let site =
            [frame("kernel_glue", Some("/work/app/glue.c"), None), frame("<module>", Some(""), Some(PYTHON_MODULE))];
        assert_eq!(program_frame(&site).unwrap().function.as_deref(), Some("<module>"));
    }

    #[test]
    fn the_program_frame_skips_libraries() {
        let rust = [
            frame("cuLaunchKernel", Some("/root/.cargo/registry/src/x/cudarc/src/sys.rs"), None),
            frame("call_once", Some("/rustc/abc/library/core/src/ops.rs"), None),
            frame("main", Some("/work/app/src/main.rs"), None),
        ];
        assert_eq!(program_frame(&rust).unwrap().function.as_deref(), Some("main"));
        let python = [
            frame("launchKernel", Some("/work/cupy/driver.cpp"), None),
            frame("forward", Some("/venv/lib/python3.12/site-packages/torch/nn/linear.py"), Some(PYTHON_MODULE)),
            frame("train", Some("/work/train.py"), Some(PYTHON_MODULE)),
        ];
        assert_eq!(program_frame(&python).unwrap().function.as_deref(), Some("train"));
        assert_eq!(describe_site(&python), "/work/train.py:1 in train");
        // A package outside site-packages (PYTHONPATH, pip --target): the script's line.
        let beside = [
            frame("copy", Some("/tmp/site/warp/context.py"), Some(PYTHON_MODULE)),
            frame("step", Some("/work/app/lib/steps.py"), Some(PYTHON_MODULE)),
            frame("<module>", Some("/work/app/main.py"), Some(PYTHON_MODULE)),
        ];
        assert_eq!(program_frame(&beside).unwrap().function.as_deref(), Some("step"));
        assert_eq!(program_frame(&beside[..1]).unwrap().function.as_deref(), Some("copy"));
        let bare = [frame("libcudart_static", None, None)];
        assert_eq!(program_frame(&bare).unwrap().function.as_deref(), Some("libcudart_static"));
        // A framework's own thread (PyTorch's autograd engine): no Python, no source files.
        let no_lines =
            |function: &str, module: &str| Frame { file: None, line: None, ..frame(function, None, Some(module)) };
        let engine = [
            Frame { function: None, ..no_lines("", "/venv/nvidia/cu13/lib/libcudart.so.13") },
            no_lines("cudaLaunchKernel", "/venv/nvidia/cu13/lib/libcudart.so.13"),
            no_lines("at::native::nll_loss_backward_out_cuda_template", "/venv/torch/lib/libtorch_cuda.so"),
        ];
        assert_eq!(
            describe_site(&engine),
            "at::native::nll_loss_backward_out_cuda_template (/venv/torch/lib/libtorch_cuda.so)"
        );
    }
}
