//! The objects the loader mapped (the program, its libraries, the shim): which one holds an
//! address, and its path. Captures use it to tell the shim's frames and the interpreter's
//! apart from the program's; reports, to name a frame's module.

use core::ffi::c_void;

/// The address range of the loaded object that holds `addr`, and its file's path (the
/// program's own for the main executable).
pub fn holding(addr: usize) -> Option<((u64, u64), String)> {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables (the address is not read).
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 {
        return None;
    }
    // The object whose loaded segments hold `addr` (matched by segment, not by load base:
    // a main executable built without PIE has a base of 0 in the program headers' terms).
    let mut found = (addr as u64, None::<(u64, u64)>);
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        // SAFETY: called by dl_iterate_phdr with valid pointers.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut (u64, Option<(u64, u64)>))) };
        let mut range = (u64::MAX, 0);
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phnum` headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
                range = (range.0.min(start), range.1.max(start + ph.p_memsz));
            }
        }
        if !(range.0..range.1).contains(&found.0) {
            return 0;
        }
        found.1 = Some(range);
        1
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut c_void) };
    Some((found.1?, path(&info)))
}

/// Where this process loaded the object at `path` (the base its offsets count from), if it
/// did: another process's frame, named by module and offset, is resolved in this copy.
pub fn base_of(path: &str) -> Option<u64> {
    let main = std::env::current_exe().ok();
    let mut found = (path, main, None::<u64>);
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        // SAFETY: called by dl_iterate_phdr with valid pointers; `data` is `found`.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut (&str, Option<std::path::PathBuf>, Option<u64>))) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a path the loader keeps.
            unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        // The main executable has no name from the loader.
        let same =
            if name.is_empty() { found.1.as_deref() == Some(std::path::Path::new(found.0)) } else { name == found.0 };
        if !same {
            return 0;
        }
        // Where its ELF header is mapped, as `dladdr`'s `dli_fbase` says (a PIE's load bias,
        // an executable built without PIE its first segment's address).
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phnum` headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD && ph.p_offset == 0 {
                found.2 = Some(info.dlpi_addr.wrapping_add(ph.p_vaddr));
            }
        }
        1
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut c_void) };
    found.2
}

/// The path of the object `info` names; the main executable's has none from the loader.
pub fn path(info: &libc::Dl_info) -> String {
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: a path the loader keeps.
        unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned()
    };
    if name.is_empty() {
        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default()
    } else {
        name
    }
}
