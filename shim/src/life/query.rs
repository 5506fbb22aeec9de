//! What a program can ask streamsan while it runs: its report so far, as JSON. The test
//! harness (`streamsan::harness::report_so_far`) finds these with `dlsym` when the shim is
//! preloaded and asserts on the result from inside a test.

use core::ffi::c_char;

/// The report so far: a NUL-terminated JSON document the caller releases with
/// [`streamsan_free_report`].
#[unsafe(no_mangle)]
pub extern "C" fn streamsan_report_json() -> *mut c_char {
    crate::hooks::model::settle();
    let mut json = super::reports::sink().json();
    json.retain(|&b| b != 0);
    match std::ffi::CString::new(json) {
        Ok(text) => text.into_raw(),
        Err(_) => core::ptr::null_mut(),
    }
}

/// Releases a document returned by [`streamsan_report_json`].
///
/// # Safety
/// `report` is null or a pointer [`streamsan_report_json`] returned, not yet released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamsan_free_report(report: *mut c_char) {
    if !report.is_null() {
        // SAFETY: made by CString::into_raw in streamsan_report_json.
        drop(unsafe { std::ffi::CString::from_raw(report) });
    }
}
