//! Interposition: every road into the driver is intercepted, and every call passes through
//! unchanged. Programs run under `streamsan run` against the stand-in driver.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// The driver calls the workload of `workload.h` makes, with `launches` launches, by the
/// exported names a legacy-stream program reaches.
fn workload_calls(launches: u64) -> Vec<(&'static str, u64)> {
    vec![
        ("cuInit", 1),
        ("cuDevicePrimaryCtxRetain", 1),
        ("cuStreamCreate", 2),
        ("cuEventCreate", 2),
        ("cuModuleLoadData", 1),
        ("cuModuleGetFunction", 1),
        ("cuMemAllocAsync", 2),
        ("cuMemsetD8Async", 1),
        ("cuEventRecord", 2),
        ("cuStreamWaitEvent", 2),
        ("cuLaunchKernel", launches),
        ("cuStreamSynchronize", 2),
        ("cuMemcpyDtoH_v2", 1),
        ("cuMemFreeAsync", 2),
        ("cuEventDestroy_v2", 2),
        ("cuStreamDestroy_v2", 2),
    ]
}

/// The per-thread-default-stream name of a workload call, as cuGetProcAddress with flag 2
/// hands it out (calls that take no stream keep their name).
fn per_thread_name(name: &str) -> String {
    match name {
        "cuMemcpyDtoH_v2" => "cuMemcpyDtoH_v2_ptds".into(),
        "cuMemAllocAsync"
        | "cuMemsetD8Async"
        | "cuEventRecord"
        | "cuStreamWaitEvent"
        | "cuLaunchKernel"
        | "cuStreamSynchronize"
        | "cuMemFreeAsync" => format!("{name}_ptsz"),
        _ => name.into(),
    }
}

fn assert_counts(run: &Run, expected: &[(String, u64)]) {
    run.assert_ran();
    for (name, n) in expected {
        assert_eq!(run.intercepted(name), *n, "intercepted {name}");
        assert_eq!(run.received(name) as u64, *n, "stand-in received {name}");
    }
}

/// The same program without streamsan: same stdout, same exit status.
fn assert_unchanged(program: &std::path::Path, args: &[&str], run: &Run) {
    let native = run_with(program, args, RunOptions { native: true, ..Default::default() });
    assert_eq!(native.output.status.code(), run.output.status.code());
    assert_eq!(native.stdout(), run.stdout());
}

#[test]
fn a_linked_program_is_intercepted() {
    let link = link_cuda();
    let exe = compile_c("road_linked", &link.iter().map(String::as_str).collect::<Vec<_>>());
    let run = run(&exe, &["7"]);
    let expected: Vec<_> = workload_calls(7).into_iter().map(|(n, c)| (n.to_string(), c)).collect();
    assert_counts(&run, &expected);
    assert!(run.stdout().contains("first byte 0x5a"), "{}", run.stdout());
    assert_unchanged(&exe, &["7"], &run);
}

#[test]
fn a_dlsym_program_is_intercepted() {
    let exe = compile_c("road_dlsym", &["-ldl"]);
    let run = run(&exe, &["5"]);
    let expected: Vec<_> = workload_calls(5).into_iter().map(|(n, c)| (n.to_string(), c)).collect();
    assert_counts(&run, &expected);
    assert_unchanged(&exe, &["5"], &run);
}

fn getproc_road(version: &str, flags: u64) {
    let exe = compile_c("road_getproc", &["-ldl"]);
    let args = [version, if flags == 2 { "2" } else { "0" }, "4"];
    let run = run(&exe, &args);
    let expected: Vec<_> = workload_calls(4)
        .into_iter()
        .map(|(n, c)| (if flags == 2 { per_thread_name(n) } else { n.to_string() }, c))
        .collect();
    assert_counts(&run, &expected);
    if flags == 2 {
        // Nothing went through the legacy-stream names.
        assert_eq!(run.intercepted("cuLaunchKernel"), 0);
        assert_eq!(run.intercepted("cuMemcpyDtoH_v2"), 0);
    }
    let out = run.stdout();
    assert!(out.contains("cuGetProcAddress@11030 is dlsym's cuGetProcAddress: yes"), "{out}");
    let status = if version == "v2" { "1" } else { "-1" };
    assert!(out.contains(&format!("unknown symbol: rc 0 pointer NULL status {status}")), "{out}");
    let getproc = if version == "v2" { "cuGetProcAddress_v2" } else { "cuGetProcAddress" };
    assert!(run.intercepted(getproc) > 18, "{getproc} calls: {}", run.intercepted(getproc));
    assert!(run.report().unrecognised_proc_addresses.is_empty());
    assert_unchanged(&exe, &args, &run);
}

#[test]
fn get_proc_address_v1_legacy_stream() {
    getproc_road("v1", 0);
}

#[test]
fn get_proc_address_v1_per_thread_stream() {
    getproc_road("v1", 2);
}

#[test]
fn get_proc_address_v2_legacy_stream() {
    getproc_road("v2", 0);
}

#[test]
fn get_proc_address_v2_per_thread_stream() {
    getproc_road("v2", 2);
}

#[test]
fn a_cudarc_program_is_intercepted() {
    let exe = artifacts().join("streamsan-cudarc-app");
    let run = run(&exe, &["6"]);
    run.assert_ran();
    assert_eq!(run.intercepted("cuLaunchKernel"), 6);
    assert_eq!(run.received("cuLaunchKernel"), 6);
    for name in
        ["cuMemAllocAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuEventRecord", "cuStreamWaitEvent"]
    {
        assert!(run.intercepted(name) > 0, "{name} not intercepted: {:?}", run.report().intercepted);
        assert_eq!(run.intercepted(name), run.received(name) as u64, "{name}");
    }
    assert_unchanged(&exe, &["6"], &run);
}

/// Lines `name(args) -> status` of the fidelity program, and the stand-in's log of the same
/// names. Host functions and stream callbacks are wrapped by the shim (the driver gets the
/// shim's trampoline and data), so their lines are compared separately.
fn fidelity(env: Vec<(&str, String)>) -> (Run, Vec<String>, Vec<String>) {
    let exe = artifacts().join("streamsan-fidelity");
    let run = run_with(&exe, &[], RunOptions { env, ..Default::default() });
    run.assert_ran();
    let program: Vec<String> = run.stdout().lines().filter(|l| l.contains(") -> ")).map(str::to_string).collect();
    let names: BTreeSet<&str> = program.iter().map(|l| &l[..l.find('(').unwrap()]).collect();
    let received: Vec<String> =
        run.calls.iter().filter(|l| names.contains(&l[..l.find('(').unwrap()])).cloned().collect();
    (run, program, received)
}

fn is_wrapped_callback(line: &str) -> bool {
    line.starts_with("cuLaunchHostFunc") || line.starts_with("cuStreamAddCallback")
}

/// A callback line with the function and its data masked: the shim passes its trampoline.
fn masked(line: &str) -> String {
    line.split(", ")
        .map(|arg| match arg.split_once('=') {
            Some(("func" | "callback" | "user_data", _)) => "*".to_string(),
            _ => arg.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn every_hooked_function_passes_its_arguments_and_status_through() {
    let (run, program, received) = fidelity(vec![]);
    assert!(program.len() >= 170, "only {} calls made", program.len());
    assert!(!run.stdout().contains("not found"), "{}", run.stdout());
    let plain = |lines: &[String]| {
        lines.iter().map(|l| if is_wrapped_callback(l) { masked(l) } else { l.clone() }).collect::<Vec<_>>()
    };
    assert_eq!(plain(&program), plain(&received));
    // Each name was intercepted exactly once.
    let report = run.report();
    for line in &program {
        let name = &line[..line.find('(').unwrap()];
        assert_eq!(report.intercepted.get(name), Some(&1), "{name}");
    }
    // A callback that the driver accepted reaches the program's function with its data.
    for call in program.iter().filter(|l| is_wrapped_callback(l) && l.ends_with("-> 0")) {
        let name = &call[..call.find('(').unwrap()];
        let data = call.split("user_data=").nth(1).unwrap().split([',', ')']).next().unwrap();
        assert!(run.stdout().contains(&format!("{name}: callback ran with user_data={data}")), "{name}");
    }
}

#[test]
fn injected_errors_reach_the_program_unchanged() {
    let (_run, program, received) = fidelity(vec![("STANDIN_FAIL", "*:1:999".into())]);
    assert!(program.len() >= 170);
    for line in &program {
        assert!(line.ends_with("-> 999"), "{line}");
    }
    assert_eq!(program.len(), received.len());
}

#[test]
fn lookups_of_other_names_pass_through() {
    let exe = compile_c("lookups", &["-ldl"]);
    let run = run(&exe, &[]);
    run.assert_ran();
    let out = run.stdout();
    assert!(out.contains("before load: cuInit NULL"), "{out}");
    assert!(out.contains("hooked name: cuLaunchKernel in libstreamsan_shim.so"), "{out}");
    assert!(out.contains("hooked name via RTLD_DEFAULT: cuInit in libstreamsan_shim.so"), "{out}");
    assert!(out.contains("unhooked name: cuDeviceGetName in libcuda"), "{out}");
    assert!(out.contains("missing name: NULL, dlerror set"), "{out}");
    assert!(out.contains("non-CUDA name: strlen is libc's: yes"), "{out}");
    assert!(out.contains("before NCCL: ncclAllReduce NULL"), "{out}");
    assert!(out.contains("hooked NCCL name: ncclAllReduce in libstreamsan_shim.so"), "{out}");
    assert!(out.contains("unhooked NCCL name: ncclCommCount in libnccl"), "{out}");
    assert!(out.contains("local NCCL via RTLD_DEFAULT: ncclAllReduce NULL"), "{out}");
}

#[test]
fn rtld_next_lookups_still_start_after_their_caller() {
    let dir = artifacts().join("scenarios");
    compile_c_as("rtld_next", "libprobe_a.so", &["-shared", "-fPIC", "-DPROBE_A", "-ldl"]);
    compile_c_as("rtld_next", "libprobe_b.so", &["-shared", "-fPIC", "-DPROBE_B"]);
    let l = format!("-L{}", dir.display());
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let exe = compile_c("rtld_next", &[&l, &rpath, "-Wl,--no-as-needed", "-lprobe_a", "-lprobe_b", "-ldl"]);
    let run = run(&exe, &[]);
    run.assert_ran();
    assert!(run.stdout().contains("found probe_target of libB"), "{}", run.stdout());
}

#[test]
fn dlsym_from_many_threads_during_start_up_neither_recurses_nor_deadlocks() {
    let ctor = compile_c_as("dlsym_threads", "libctor.so", &["-shared", "-fPIC", "-DCTOR_LIB", "-ldl"]);
    let exe = compile_c("dlsym_threads", &["-ldl", "-lpthread"]);
    for _ in 0..5 {
        let dir = scratch("dlsym-threads");
        let mut child = Command::new(env!("CARGO_BIN_EXE_streamsan"))
            .arg("run")
            .arg("--report")
            .arg(dir.join("report.%p.json"))
            .arg("--")
            .arg(&exe)
            .env("STREAMSAN_SHIM", shim())
            .env("LD_LIBRARY_PATH", driver_dir())
            .env("CTOR_LIB", &ctor)
            .env_remove("STANDIN_LOG")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("dlsym from many threads deadlocked");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}");
    }
}

#[test]
fn a_program_that_never_touches_cuda_is_unaffected() {
    let run = run(std::path::Path::new("/bin/sh"), &["-c", "echo hello; exit 7"]);
    assert_eq!(run.output.status.code(), Some(7));
    assert_eq!(run.stdout(), "hello\n");
    assert!(run.reports().is_empty(), "a report for a process that made no driver call");
}

#[test]
fn without_a_driver_the_program_fails_as_it_would_alone() {
    let exe = compile_c("road_dlsym", &["-ldl"]);
    let nowhere = scratch("no-driver");
    let env = || vec![("LD_LIBRARY_PATH", nowhere.display().to_string())];
    let native = run_with(&exe, &[], RunOptions { env: env(), native: true });
    let under = run_with(&exe, &[], RunOptions { env: env(), ..Default::default() });
    assert_eq!(native.output.status.code(), Some(5));
    assert_eq!(under.output.status.code(), Some(5));
    assert_eq!(native.stdout(), under.stdout());
    let (native_err, under_err) = (native.stderr(), under.stderr());
    assert!(under_err.starts_with(&native_err), "{under_err}");
    let extra: Vec<&str> = under_err[native_err.len()..].lines().collect();
    assert_eq!(extra.len(), 1, "{extra:?}");
    assert!(extra[0].starts_with("streamsan: ") && extra[0].contains("driver"), "{extra:?}");
}

#[test]
fn the_driver_comes_from_streamsan_real_libcuda_or_falls_back_with_a_line() {
    let link = link_cuda();
    let exe = compile_c("road_linked", &link.iter().map(String::as_str).collect::<Vec<_>>());
    let standin = artifacts().join("libcuda_standin.so").display().to_string();
    let named =
        run_with(&exe, &["2"], RunOptions { env: vec![("STREAMSAN_REAL_LIBCUDA", standin)], ..Default::default() });
    named.assert_ran();
    assert_eq!(named.intercepted("cuLaunchKernel"), 2);
    assert!(!named.stderr().contains("STREAMSAN_REAL_LIBCUDA"), "{}", named.stderr());

    let missing = run_with(
        &exe,
        &["2"],
        RunOptions { env: vec![("STREAMSAN_REAL_LIBCUDA", "/nonexistent/libcuda.so.1".into())], ..Default::default() },
    );
    missing.assert_ran();
    assert_eq!(missing.intercepted("cuLaunchKernel"), 2);
    let lines: Vec<String> =
        missing.stderr().lines().filter(|l| l.contains("STREAMSAN_REAL_LIBCUDA")).map(String::from).collect();
    assert_eq!(lines.len(), 1, "{}", missing.stderr());
    assert!(lines[0].starts_with("streamsan: cannot load the CUDA driver named by STREAMSAN_REAL_LIBCUDA=/nonexistent"));
}

#[test]
fn driver_calls_in_exit_handlers_are_followed() {
    let exe = compile_c("driver_at_exit", &link_cuda().iter().map(String::as_str).collect::<Vec<_>>());
    let run = run(&exe, &[]);
    run.assert_ran();
    assert_eq!(run.stdout(), "exit handler done\n");
    let report = run.report();
    assert!(
        report.races.iter().any(|r| r.kind == "cross-stream-race" && r.hazard.map(|h| h.as_str()) == Some("RAW")),
        "the exit handler's read races with main's write: {:?}",
        report.races
    );
}
