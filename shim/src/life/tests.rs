//! The test API (`include/streamsan.h`): a test runner names the test running, and at its end
//! asks for the races whose second operation was made in it, to fail that test with them.

use core::ffi::{c_char, CStr};

use streamsan::report::text;

use crate::sites::test;

/// Calls from now on are made in the test `name` (a NUL-terminated string); null or empty:
/// in no test.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamsan_set_test(name: *const c_char) {
    // SAFETY: the caller passes null or a NUL-terminated string.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_string_lossy());
    test::set(name.as_deref().filter(|n| !n.is_empty()));
}

/// The races so far whose second operation was made in the test `name`, suppressions
/// applied, as `streamsan run` prints them (NUL-terminated, released with
/// `streamsan_free_report`); null when there are none.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamsan_test_races(name: *const c_char) -> *mut c_char {
    if name.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    crate::hooks::model::settle();
    let report = super::reports::sink().report();
    let races: String =
        report.races.iter().filter(|r| r.second.test.as_deref() == Some(&name)).map(text::race).collect();
    if races.is_empty() {
        return core::ptr::null_mut();
    }
    std::ffi::CString::new(races.replace('\0', "")).map_or(core::ptr::null_mut(), |text| text.into_raw())
}
