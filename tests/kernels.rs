//! What streamsan learns of kernels from their handles: names and parameter layouts, which
//! belong to a handle only until its code is unloaded.

use crate::common::*;

#[test]
fn a_handle_reused_after_unload_is_learnt_again() {
    let exe = compile_c("module_reload", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>());
    let run = run(&exe, &[]);
    run.assert_ran();
    run.assert_reports_match_the_schema();
    // The stand-in reuses handles as a driver does; without reuse the test proves nothing.
    assert_eq!(run.stdout().trim(), "function handle reused");
    let report = run.report();
    let pairs: Vec<_> = report
        .races
        .iter()
        .map(|r| (r.kind.as_str(), r.hazard.map(|h| h.as_str()), r.first.kernel.as_deref(), r.second.kernel.as_deref()))
        .collect();
    assert_eq!(
        pairs,
        [("cross-stream-race", Some("WAR"), Some("first(float const*)"), Some("second(float*, float*)"))],
        "second's write of x must meet first's read, under their own names"
    );
}

#[test]
fn a_kernel_of_the_same_name_in_a_module_loaded_at_a_reused_handle_is_learnt_again() {
    let exe = compile_c("module_reload", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>());
    // Names come from what the program asked for, not from the driver (which refuses here).
    let env = vec![("STANDIN_FAIL", "cuFuncGetName:*:500".to_string())];
    let run = run_with(&exe, &["same_name"], RunOptions { env, ..Default::default() });
    run.assert_ran();
    // Name, module handle and function handle all reused: only the unload tells them apart.
    assert_eq!(run.stdout().trim(), "module handle reused, function handle reused");
    let report = run.report();
    let pairs: Vec<_> =
        report.races.iter().map(|r| (r.kind.as_str(), r.first.api.as_str(), r.second.kernel.as_deref())).collect();
    assert_eq!(
        pairs,
        [
            ("cross-stream-race", "cuMemsetD8Async", Some("k")),
            ("cross-stream-race", "cuMemsetD8Async", Some("first(float const*)"))
        ],
        "k's second parameter, x; first, of the module still loaded, under its name"
    );
}
