//! `streamsan::harness`: a program run under the shim from a test, the races queried and
//! asserted on; and a test binary that runs itself under the shim and asks for its report.

use std::process::Command;
use std::sync::Arc;

use crate::common::*;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use streamsan::harness::{report_so_far, Streamsan};

fn lifecycle_run(mode: &str) -> streamsan::harness::Run {
    let mut program = Command::new(lifecycle());
    program.arg(mode).env("LD_LIBRARY_PATH", driver_dir());
    Streamsan::with_shim(shim()).run(program).expect("run under streamsan")
}

#[test]
fn races_are_queried_by_kind_kernel_stream_and_call_site() {
    let run = lifecycle_run("races");
    assert_eq!(run.status.code(), Some(66));
    assert_eq!(run.stdout, "done\n");
    assert_eq!(run.races().count(), 2);
    assert_eq!(run.races().kind("use-before-alloc").count(), 1);
    assert_eq!(run.races().kernel("scale").count(), 2);
    assert_eq!(run.races().kind("free-race").count(), 0);
    assert_eq!(run.races().at("lifecycle.c:").count(), 2);
    assert_eq!(run.races().at("cross_stream").kind("cross-stream-race").count(), 1, "{}", run.races().describe());
    let stream = run.races().kind("cross-stream-race").iter().next().unwrap().second.stream.handle.clone();
    assert_eq!(run.races().stream(&stream).count(), 2, "both races have an operation on that stream");
    assert_eq!(run.races().stream("0xdead").count(), 0);
}

#[test]
fn assert_clean_passes_a_clean_run_and_lists_the_races_of_a_racy_one() {
    lifecycle_run("clean").assert_clean();
    let racy = lifecycle_run("races");
    let failure = std::panic::catch_unwind(|| racy.assert_clean()).expect_err("races found");
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(message.starts_with("streamsan found races:\n=================="), "{message}");
    assert_eq!(message.matches("WARNING: streamsan:").count(), 2);
}

#[test]
fn options_reach_the_shim() {
    let mut program = Command::new(lifecycle());
    program.arg("races").env("LD_LIBRARY_PATH", driver_dir());
    let run = Streamsan::with_shim(shim())
        .option("halt_on_error", "1")
        .unwrap()
        .option("exitcode", "5")
        .unwrap()
        .run(program)
        .unwrap();
    assert_eq!(run.status.code(), Some(5));
    assert_eq!(run.races().count(), 1);
    assert!(Streamsan::with_shim(shim()).option("halt_on_eror", "1").is_err());
}

/// cudarc's `scale(out, in, n)` from PTX text.
const SCALE_PTX: &str = ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry scale(.param .u64 o, .param .u64 i, .param .u32 n)\n{\n ret;\n}\n";

#[test]
fn a_test_binary_under_the_shim_asks_for_its_report_so_far() {
    let Some(empty) = report_so_far() else {
        // Not under the shim: run this very test again, under it.
        let mut me = Command::new(std::env::current_exe().unwrap());
        me.args(["--exact", "harness::a_test_binary_under_the_shim_asks_for_its_report_so_far", "--test-threads", "1"]);
        me.env("LD_LIBRARY_PATH", driver_dir());
        // The races are this test's to judge: no exit status of streamsan's.
        let run = Streamsan::with_shim(shim()).option("exitcode", "0").unwrap().run(me).unwrap();
        assert!(run.stdout.contains("test result: ok. 1 passed"), "{}\n{}", run.stdout, run.stderr);
        assert_eq!(run.races().kind("use-before-alloc").count(), 1, "{}", run.races().describe());
        return;
    };
    empty.assert_clean();
    let ctx: Arc<CudaContext> = CudaContext::new(0).unwrap();
    // SAFETY: this test orders its streams itself (and leaves a wait out).
    unsafe { ctx.disable_event_tracking() };
    let (producer, consumer) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let scale = ctx.load_module(Ptx::from_src(SCALE_PTX)).unwrap().load_function("scale").unwrap();
    let x = producer.alloc_zeros::<f32>(64).unwrap();
    let mut y = consumer.alloc_zeros::<f32>(64).unwrap();
    consumer.synchronize().unwrap();
    let n = 64i32;
    let mut launch = consumer.launch_builder(&scale);
    launch.arg(&mut y).arg(&x).arg(&n);
    unsafe { launch.launch(LaunchConfig::for_num_elems(64)) }.unwrap();
    let report = report_so_far().expect("still under the shim");
    let races = report.races().kind("use-before-alloc");
    // This file's name needs line tables, which only the debug build of a test has (the
    // workspace's release profile keeps none).
    let here = if cfg!(debug_assertions) { races.at("harness.rs").count() } else { races.count() };
    assert_eq!(here, 1, "{}", report.races().describe());
}
