//! The test API (`streamsan_set_test`, `streamsan_test_races`), as a test runner uses it: a race
//! names the test each of its operations was made in, the same race in two tests is two
//! entries, and the races of a test are asked for by its name.

use std::ffi::{c_char, CStr, CString};
use std::process::Command;
use std::sync::Arc;

use crate::common::*;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use streamsan::harness::{report_so_far, Streamsan};

const SCALE_PTX: &str = ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry scale(.param .u64 o, .param .u64 i, .param .u32 n)\n{\n ret;\n}\n";

type SetTest = unsafe extern "C" fn(*const c_char);
type TestRaces = unsafe extern "C" fn(*const c_char) -> *mut c_char;
type FreeReport = unsafe extern "C" fn(*mut c_char);

/// The shim's export `name`, looked up as a test runner would.
fn export<F>(name: &CStr) -> Option<F> {
    // SAFETY: a lookup in the global scope; the caller names the export's signature
    // (shim/include/streamsan.h).
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut libc::c_void, F>(&found) })
}

fn set_test(name: Option<&str>) {
    let set: SetTest = export(c"streamsan_set_test").unwrap();
    let name = name.map(|n| CString::new(n).unwrap());
    // SAFETY: null or a NUL-terminated string.
    unsafe { set(name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr())) };
}

/// The races of test `name` as the shim prints them, or None.
fn test_races(name: &str) -> Option<String> {
    let races: TestRaces = export(c"streamsan_test_races").unwrap();
    let free: FreeReport = export(c"streamsan_free_report").unwrap();
    let name = CString::new(name).unwrap();
    // SAFETY: the text is NUL-terminated and released once, by the shim.
    unsafe {
        let text = races(name.as_ptr());
        (!text.is_null()).then(|| {
            let copy = CStr::from_ptr(text).to_string_lossy().into_owned();
            free(text);
            copy
        })
    }
}

#[test]
fn a_race_belongs_to_the_test_of_its_second_operation() {
    if export::<SetTest>(c"streamsan_set_test").is_none() {
        // Not under the shim: run this very test again, under it.
        let mut me = Command::new(std::env::current_exe().unwrap());
        me.args(["--exact", "test_api::a_race_belongs_to_the_test_of_its_second_operation", "--test-threads", "1"]);
        me.env("LD_LIBRARY_PATH", driver_dir());
        let run = Streamsan::with_shim(shim()).option("exitcode", "0").unwrap().run(me).unwrap();
        assert!(run.stdout.contains("test result: ok. 1 passed"), "{}\n{}", run.stdout, run.stderr);
        // A use-before-alloc and a read of the memset's bytes, in each test.
        let tests: Vec<_> = run.races().iter().map(|r| (r.first.test.as_deref(), r.second.test.as_deref())).collect();
        let (racy, again) = ((Some("suite::alloc"), Some("suite::racy")), (Some("suite::alloc"), Some("suite::again")));
        assert_eq!(tests, [racy, racy, again, again], "{}", run.races().describe());
        assert!(run.stderr.contains(", in test suite::racy:"), "{}", run.stderr);
        return;
    }
    let ctx: Arc<CudaContext> = CudaContext::new(0).unwrap();
    // SAFETY: this test orders its streams itself (and leaves a wait out).
    unsafe { ctx.disable_event_tracking() };
    let (producer, consumer) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let scale = ctx.load_module(Ptx::from_src(SCALE_PTX)).unwrap().load_function("scale").unwrap();
    set_test(Some("suite::alloc"));
    let x = producer.alloc_zeros::<f32>(64).unwrap();
    let mut y = consumer.alloc_zeros::<f32>(64).unwrap();
    consumer.synchronize().unwrap();
    let n = 64i32;
    // The same launch, from the same call site, in two tests: a race in each.
    for test in ["suite::racy", "suite::again"] {
        set_test(Some(test));
        let mut launch = consumer.launch_builder(&scale);
        launch.arg(&mut y).arg(&x).arg(&n);
        unsafe { launch.launch(LaunchConfig::for_num_elems(64)) }.unwrap();
    }
    set_test(None);
    // The buffers' frees, ordered after the launches.
    consumer.synchronize().unwrap();
    let racy = test_races("suite::racy").expect("the race of suite::racy");
    assert!(racy.starts_with("==================\nWARNING: streamsan: "), "{racy}");
    assert!(racy.contains(", in test suite::racy:") && !racy.contains("suite::again:"), "{racy}");
    assert!(test_races("suite::again").is_some());
    assert_eq!(test_races("suite::alloc"), None);
    assert_eq!(report_so_far().unwrap().races().count(), 4);
}
