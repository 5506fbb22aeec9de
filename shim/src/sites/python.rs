//! Python frames in call sites: in a CPython process a capture also records the calling
//! thread's Python frames as (code object, byte offset) pairs, read without the GIL where the
//! frame layout is known, and reports put them where the interpreter's native frames were.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

use streamsan::hash::{fast_map, FastMap};

use streamsan::report::frames::PYTHON_MODULE;
use streamsan::report::Frame;

use super::objects;
use crate::intercept::{diag, driver};

/// Python frames kept per call site.
pub const DEPTH: usize = 8;

type Object = *mut c_void;

/// The CPython functions streamsan uses; absent outside a Python process.
struct Api {
    is_initialized: unsafe extern "C" fn() -> c_int,
    gil_check: unsafe extern "C" fn() -> c_int,
    /// Ends the calling thread with `pthread_exit` if the interpreter is finalizing.
    gil_ensure: unsafe extern "C-unwind" fn() -> c_int,
    gil_release: unsafe extern "C" fn(c_int),
    this_thread_state: unsafe extern "C" fn() -> Object,
    /// Borrowed reference to the current frame (GIL held).
    get_frame: unsafe extern "C" fn() -> Object,
    frame_get_back: unsafe extern "C" fn(Object) -> Object,
    frame_get_code: unsafe extern "C" fn(Object) -> Object,
    frame_get_lasti: unsafe extern "C" fn(Object) -> c_int,
    code_addr2line: unsafe extern "C" fn(Object, c_int) -> c_int,
    get_attr_string: unsafe extern "C" fn(Object, *const c_char) -> Object,
    unicode_as_utf8: unsafe extern "C" fn(Object) -> *const c_char,
    dec_ref: unsafe extern "C" fn(Object),
    err_clear: unsafe extern "C" fn(),
    /// `&PyCode_Type`.
    code_type: usize,
    /// `offsetof(PyCodeObject, co_code_adaptive)`: where a code object's instructions start.
    code_units: usize,
    /// The frame layout of this interpreter version, if streamsan knows it.
    layout: Option<Layout>,
}

/// Where CPython keeps the frame chain (`Include/cpython/pystate.h`,
/// `Include/internal/pycore_frame.h`).
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Where the thread state points to its `_PyCFrame` (3.11, 3.12), which holds the
    /// current frame; none where the thread state holds it itself (3.13).
    thread_cframe: Option<usize>,
    /// Where the current frame's pointer is, in the `_PyCFrame` or the thread state.
    current_frame: usize,
    frame_code: usize,
    frame_previous: usize,
    /// The instruction the frame is at: the last one begun (`prev_instr`, 3.11 and 3.12) or
    /// the one under way (`instr_ptr`, 3.13), either way in the line of the call.
    frame_instr: usize,
    frame_owner: usize,
    /// Frames owned by the C stack are the interpreter's, not the program's.
    owner_c_stack: Option<u8>,
}

impl Layout {
    fn for_version(major: u32, minor: u32) -> Option<Layout> {
        match (major, minor) {
            (3, 11) => Some(Layout {
                thread_cframe: Some(56),
                current_frame: 8,
                frame_code: 32,
                frame_previous: 48,
                frame_instr: 56,
                frame_owner: 69,
                owner_c_stack: None,
            }),
            (3, 12) => Some(Layout {
                thread_cframe: Some(56),
                current_frame: 0,
                frame_code: 0,
                frame_previous: 8,
                frame_instr: 56,
                frame_owner: 70,
                owner_c_stack: Some(3),
            }),
            (3, 13) => Some(Layout {
                thread_cframe: None,
                current_frame: 72,
                frame_code: 0,
                frame_previous: 8,
                frame_instr: 56,
                frame_owner: 70,
                owner_c_stack: Some(3),
            }),
            _ => None,
        }
    }
}

fn api() -> Option<&'static Api> {
    streamsan::hot! { static API: OnceLock<Option<Api>> = OnceLock::new(); }
    API.get_or_init(|| {
        fn find<F: Copy>(name: &CStr) -> Option<F> {
            // SAFETY: the global scope.
            let f = unsafe { driver::lookup_in(libc::RTLD_DEFAULT, name) };
            // SAFETY: F is CPython's signature for `name`.
            (!f.is_null()).then(|| unsafe { core::mem::transmute_copy::<*mut c_void, F>(&f) })
        }
        // SAFETY: the global scope.
        let code_type = unsafe { driver::lookup_in(libc::RTLD_DEFAULT, c"PyCode_Type") } as usize;
        if code_type == 0 {
            return None;
        }
        // SAFETY: PyTypeObject.tp_basicsize, after the object header and tp_name; for the
        // code type it is offsetof(PyCodeObject, co_code_adaptive).
        let code_units = unsafe { *((code_type + 32) as *const isize) } as usize;
        let get_version: Option<unsafe extern "C" fn() -> *const c_char> = find(c"Py_GetVersion");
        let layout = get_version.and_then(|v| {
            // SAFETY: a static version string such as "3.12.0 (main, ...".
            let version = unsafe { CStr::from_ptr(v()) }.to_string_lossy();
            // A free-threaded build's objects and thread states are laid out otherwise.
            if version.contains("free-threading") {
                return None;
            }
            let mut parts = version.split(|c: char| !c.is_ascii_digit());
            Layout::for_version(parts.next()?.parse().ok()?, parts.next()?.parse().ok()?)
        });
        Some(Api {
            is_initialized: find(c"Py_IsInitialized")?,
            gil_check: find(c"PyGILState_Check")?,
            gil_ensure: find(c"PyGILState_Ensure")?,
            gil_release: find(c"PyGILState_Release")?,
            this_thread_state: find(c"PyGILState_GetThisThreadState")?,
            get_frame: find(c"PyEval_GetFrame")?,
            frame_get_back: find(c"PyFrame_GetBack")?,
            frame_get_code: find(c"PyFrame_GetCode")?,
            frame_get_lasti: find(c"PyFrame_GetLasti")?,
            code_addr2line: find(c"PyCode_Addr2Line")?,
            get_attr_string: find(c"PyObject_GetAttrString")?,
            unicode_as_utf8: find(c"PyUnicode_AsUTF8")?,
            dec_ref: find(c"Py_DecRef")?,
            err_clear: find(c"PyErr_Clear")?,
            code_type,
            code_units,
            layout,
        })
    })
    .as_ref()
}

// ---- Reading the frame chain without the GIL ------------------------------------------------

/// Captures that must succeed with checked reads before reads go direct.
const PROBATION: u32 = 64;
static PROVEN: AtomicU32 = AtomicU32::new(0);
static LAYOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Reads a `T` at `addr` of this process: while on probation (`CHECKED`) through
/// `process_vm_readv`, which reports a bad address instead of faulting; after it, directly,
/// refusing only a null address (a launch reads some forty words of frames: a check more
/// each is a good part of the walk).
fn read<T: Copy, const CHECKED: bool>(addr: usize) -> Option<T> {
    if addr == 0 {
        return None;
    }
    if !CHECKED {
        // SAFETY: the layout has read valid frames PROBATION times; the chain is this
        // thread's own, stable while it is inside the driver call.
        return Some(unsafe { core::ptr::read_unaligned(addr as *const T) });
    }
    let mut value = core::mem::MaybeUninit::<T>::uninit();
    let local = libc::iovec { iov_base: value.as_mut_ptr().cast(), iov_len: core::mem::size_of::<T>() };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: core::mem::size_of::<T>() };
    // SAFETY: reads our own memory into `value`; fails cleanly on an unmapped address.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    // SAFETY: fully written when n equals its size.
    (n == core::mem::size_of::<T>() as isize).then(|| unsafe { value.assume_init() })
}

/// The calling thread's frames as (code object, byte offset), innermost first, read
/// through `layout`. None if anything read does not look like a frame.
fn read_chain(api: &Api, layout: &Layout, out: &mut [RawFrame; DEPTH]) -> Option<usize> {
    if PROVEN.load(Ordering::Relaxed) < PROBATION {
        let n = read_frames::<true>(api, layout, out)?;
        PROVEN.fetch_add(1, Ordering::Relaxed);
        return Some(n);
    }
    read_frames::<false>(api, layout, out)
}

fn read_frames<const CHECKED: bool>(api: &Api, layout: &Layout, out: &mut [RawFrame; DEPTH]) -> Option<usize> {
    // SAFETY: thread-local lookup, valid without the GIL.
    let thread = unsafe { (api.this_thread_state)() } as usize;
    if thread == 0 {
        return Some(0);
    }
    let holder = match layout.thread_cframe {
        Some(cframe) => read::<_, CHECKED>(thread + cframe)?,
        None => thread,
    };
    let mut frame: usize = read::<_, CHECKED>(holder + layout.current_frame)?;
    let mut n = 0;
    let mut steps = 0;
    while frame != 0 && n < DEPTH && steps < 4 * DEPTH {
        steps += 1;
        let owner: u8 = read::<_, CHECKED>(frame + layout.frame_owner)?;
        if layout.owner_c_stack != Some(owner) {
            let code: usize = read::<_, CHECKED>(frame + layout.frame_code)?;
            let code_type: usize = read::<_, CHECKED>(code + 8)?;
            if code_type != api.code_type {
                return None;
            }
            let instr: usize = read::<_, CHECKED>(frame + layout.frame_instr)?;
            let offset = instr.saturating_sub(code + api.code_units);
            out[n] = (code, offset as c_int);
            n += 1;
        }
        frame = read::<_, CHECKED>(frame + layout.frame_previous)?;
    }
    Some(n)
}

/// The frames through the C API: only with the GIL held.
///
/// # Safety
/// The calling thread holds the GIL.
unsafe fn walk_with_gil(api: &Api, out: &mut [RawFrame; DEPTH]) -> usize {
    unsafe {
        let mut frame = (api.get_frame)();
        let mut owned = false;
        let mut n = 0;
        while !frame.is_null() && n < DEPTH {
            let code = (api.frame_get_code)(frame);
            if !code.is_null() {
                out[n] = (code as usize, (api.frame_get_lasti)(frame));
                n += 1;
                // The frame holds its own reference: the pointer stays valid while it lives.
                (api.dec_ref)(code);
            }
            let back = (api.frame_get_back)(frame);
            if owned {
                (api.dec_ref)(frame);
            }
            frame = back;
            owned = true;
        }
        if owned && !frame.is_null() {
            (api.dec_ref)(frame);
        }
        n
    }
}

// ---- Interning and resolving ------------------------------------------------------------

/// Interned frames: (code object, offset) -> id, and id -> resolved frame.
struct Frames {
    ids: FastMap<(usize, c_int), u32>,
    resolved: RwLock<Vec<Frame>>,
}

fn frames() -> &'static Frames {
    static FRAMES: OnceLock<Frames> = OnceLock::new();
    FRAMES.get_or_init(|| Frames { ids: fast_map(), resolved: RwLock::new(Vec::new()) })
}

/// A Python frame as found on a thread's stack: (code object, byte offset).
pub type RawFrame = (usize, c_int);

/// The calling thread's Python frames, innermost first, as found: cheap, and enough to tell
/// a call site from another ([`intern_all`] names them).
pub fn walk(out: &mut [RawFrame; DEPTH]) -> usize {
    let Some(api) = api() else { return 0 };
    // SAFETY: CPython's API; the GIL-only calls only with the GIL held.
    unsafe {
        if (api.is_initialized)() == 0 {
            return 0;
        }
        match api.layout.filter(|_| !LAYOUT_FAILED.load(Ordering::Relaxed)) {
            Some(layout) => match read_chain(api, &layout, out) {
                Some(n) => n,
                None => {
                    LAYOUT_FAILED.store(true, Ordering::Relaxed);
                    diag::warn("cannot read this Python's frames; reports show native frames only");
                    0
                }
            },
            None if (api.gil_check)() != 0 => walk_with_gil(api, out),
            None => 0,
        }
    }
}

/// Interned ids of frames [`walk`] just found (still on the calling thread's stack, so their
/// code objects live), into `out`. Returns whether every one was resolved to a name (one that
/// was not gets a fresh id, and is tried again next time).
pub fn intern_all(frames: &[RawFrame], out: &mut [u32; DEPTH]) -> bool {
    let Some(api) = api() else { return true };
    let mut all = true;
    for (slot, &(code, offset)) in out.iter_mut().zip(frames) {
        let (id, resolved) = intern(api, code, offset);
        *slot = id;
        all &= resolved;
    }
    all
}

fn intern(api: &'static Api, code: usize, offset: c_int) -> (u32, bool) {
    let frames = frames();
    if let Some(id) = frames.ids.get(&(code, offset)) {
        return (*id, true);
    }
    let (frame, resolved) = match resolve_now(api, code, offset) {
        Some(frame) => (frame, true),
        None => {
            (Frame { address: format!("py+{offset}"), module: Some(PYTHON_MODULE.into()), ..Frame::default() }, false)
        }
    };
    let push = |frame: Frame| {
        let mut list = frames.resolved.write().unwrap_or_else(|e| e.into_inner());
        list.push(frame);
        (list.len() - 1) as u32
    };
    if !resolved {
        // Not remembered under its key: the next capture tries again.
        return (push(frame), false);
    }
    (*frames.ids.entry((code, offset)).or_insert_with(|| push(frame)).value(), true)
}

/// Resolves a pair whose frame is on the calling thread's stack (so its code object lives).
fn resolve_now(api: &'static Api, code: usize, offset: c_int) -> Option<Frame> {
    // Finalized: nothing to ask (the C API must not be called then, and the code objects are
    // freed). First, as `PyGILState_Check` then says 1 to every thread (3.12's, its
    // thread-state key deleted).
    // SAFETY: Py_IsInitialized has no precondition.
    if unsafe { (api.is_initialized)() } == 0 {
        return None;
    }
    // SAFETY: PyGILState_Check has no precondition.
    if unsafe { (api.gil_check)() } != 0 {
        // SAFETY: the GIL is held and the code object alive.
        return Some(unsafe { resolve(api, code as Object, offset) });
    }
    let (requests, replies) = resolver(api)?;
    if HELPER_ENDED.load(Ordering::Relaxed) {
        return None;
    }
    let replies = replies.lock().unwrap_or_else(|e| e.into_inner());
    // Not `send`: a helper that CPython is ending reads no more, and a full queue would block.
    requests.try_send((code, offset)).ok()?;
    let deadline = std::time::Instant::now() + Duration::from_millis(200);
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        // Answers to requests that timed out earlier may come first: skip them.
        match replies.recv_timeout(left) {
            Ok((key, frame)) if key == (code, offset) => return Some(frame),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
}

type Resolver = (SyncSender<RawFrame>, Mutex<Receiver<(RawFrame, Frame)>>);

/// What the helper thread serves from.
struct Served {
    api: &'static Api,
    requests: Mutex<Receiver<RawFrame>>,
    answers: SyncSender<(RawFrame, Frame)>,
}

static SERVED: OnceLock<Served> = OnceLock::new();

/// A thread that takes the GIL to resolve frames for threads that do not hold it.
fn resolver(api: &'static Api) -> Option<&'static Resolver> {
    static RESOLVER: OnceLock<Option<Resolver>> = OnceLock::new();
    RESOLVER
        .get_or_init(|| {
            let (requests, incoming) = mpsc::sync_channel::<RawFrame>(16);
            let (answers, replies) = mpsc::sync_channel::<(RawFrame, Frame)>(16);
            SERVED.set(Served { api, requests: Mutex::new(incoming), answers }).ok()?;
            type Start = extern "C" fn(*mut c_void) -> *mut c_void;
            // SAFETY: a detached thread running `serve`, which needs no argument. The libc
            // crate types the start routine "C"; "C-unwind" is the same call, allowed to unwind.
            unsafe {
                let start = core::mem::transmute::<extern "C-unwind" fn(*mut c_void) -> *mut c_void, Start>(serve);
                let mut thread: libc::pthread_t = 0;
                if libc::pthread_create(&mut thread, core::ptr::null(), start, core::ptr::null_mut()) != 0 {
                    return None;
                }
                libc::pthread_detach(thread);
            }
            Some((requests, Mutex::new(replies)))
        })
        .as_ref()
}

/// Set when the helper thread has ended: requests then go unanswered at once.
static HELPER_ENDED: AtomicBool = AtomicBool::new(false);

/// Alive on the helper thread: its destructor runs when the thread ends, however it ends
/// (the C library runs thread-locals' destructors in `pthread_exit` too).
struct Helper;

impl Drop for Helper {
    fn drop(&mut self) {
        HELPER_ENDED.store(true, Ordering::Relaxed);
    }
}

thread_local! {
    static HELPER: Helper = const { Helper };
}

/// The helper thread: resolves each request with the GIL taken. `PyGILState_Ensure` may end
/// the thread with a forced unwind (`pthread_exit` while the interpreter finalizes), so
/// nothing with a destructor lives across it on this stack: the request is two numbers, the
/// rest static or thread-local.
extern "C-unwind" fn serve(_: *mut c_void) -> *mut c_void {
    // SAFETY: names the calling thread; the name fits the kernel's 16 bytes.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), c"streamsan-python".as_ptr()) };
    HELPER.with(|_| ());
    let Some(Served { api, requests, answers }) = SERVED.get() else { return core::ptr::null_mut() };
    loop {
        let Ok((code, offset)) = requests.lock().unwrap_or_else(|e| e.into_inner()).recv() else {
            return core::ptr::null_mut();
        };
        // The interpreter may have finalized since the request: no answer.
        // SAFETY: Py_IsInitialized has no precondition.
        if unsafe { (api.is_initialized)() } == 0 {
            continue;
        }
        // SAFETY: the GIL is taken for the resolution. The requester waits with the frame
        // alive; one that gave up may have let the code object go, so check that it still is
        // one.
        let frame = unsafe {
            let gil = (api.gil_ensure)();
            let alive = read::<usize, true>(code + 8) == Some(api.code_type);
            let frame = alive.then(|| resolve(api, code as Object, offset));
            (api.gil_release)(gil);
            frame
        };
        if let Some(frame) = frame {
            if answers.send(((code, offset), frame)).is_err() {
                return core::ptr::null_mut();
            }
        }
    }
}

/// # Safety
/// With the GIL held, `code` a live code object.
unsafe fn resolve(api: &Api, code: Object, offset: c_int) -> Frame {
    let attr = |name: &CStr| unsafe {
        let value = (api.get_attr_string)(code, name.as_ptr());
        if value.is_null() {
            (api.err_clear)();
            return None;
        }
        let text = (api.unicode_as_utf8)(value);
        let text = if text.is_null() {
            (api.err_clear)();
            None
        } else {
            Some(CStr::from_ptr(text).to_string_lossy().into_owned())
        };
        (api.dec_ref)(value);
        text
    };
    let line = unsafe { (api.code_addr2line)(code, offset) };
    Frame {
        address: format!("py+{offset}"),
        function: attr(c"co_qualname").or_else(|| attr(c"co_name")),
        file: attr(c"co_filename"),
        line: (line >= 0).then_some(line as u32),
        module: Some(PYTHON_MODULE.to_string()),
    }
}

/// The frame an id stands for.
pub fn frame(id: u32) -> Frame {
    frames().resolved.read().unwrap_or_else(|e| e.into_inner()).get(id as usize).cloned().unwrap_or_default()
}

/// Whether a native frame belongs to the interpreter (where Python frames go instead).
pub fn is_interpreter(frame: &Frame) -> bool {
    is_interpreter_file(frame.module.as_deref().unwrap_or(""))
}

fn is_interpreter_file(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.starts_with("python") || file.starts_with("libpython")
}

/// The addresses of the interpreter's code (the object that holds CPython's API, the
/// `python3.x` executable or `libpython3.x.so`), where [`is_interpreter`] would name its
/// frames so. A report shows a Python program's stack as its native frames up to the
/// interpreter's first, then its Python frames: a capture with Python frames keeps the native
/// chain only that far, shorter to read again where the interpreter is near (ctypes, CuPy,
/// numba); PyTorch's chains are some 26 frames deep before it, past the default depth.
pub fn interpreter_range() -> Option<(u64, u64)> {
    static RANGE: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    *RANGE.get_or_init(|| {
        let (range, path) = objects::holding(api()?.is_initialized as usize)?;
        is_interpreter_file(&path).then_some(range)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the interpreter below is finalizing: its `PyGILState_Ensure` then ends the
    /// calling thread, as CPython 3.8-3.13's does.
    static FINALIZING: AtomicBool = AtomicBool::new(false);
    /// Whether it has finalized: `Py_IsInitialized` then says 0, `PyGILState_Check` 1, and
    /// `PyGILState_Ensure` or a code object's line would crash (here they note the call).
    static FINALIZED: AtomicBool = AtomicBool::new(false);
    static CALLED_AFTER_FINALIZED: AtomicBool = AtomicBool::new(false);
    const CODE_TYPE: usize = 0xc0de;
    /// A code object as `serve` checks one: its type at offset 8.
    static CODE: [usize; 2] = [0, CODE_TYPE];

    extern "C" fn initialized() -> c_int {
        !FINALIZED.load(Ordering::Relaxed) as c_int
    }
    /// Nobody holds the GIL, but once finalized CPython 3.12 says this thread does.
    extern "C" fn gil_check() -> c_int {
        FINALIZED.load(Ordering::Relaxed) as c_int
    }
    extern "C-unwind" fn ensure() -> c_int {
        if FINALIZED.load(Ordering::Relaxed) {
            CALLED_AFTER_FINALIZED.store(true, Ordering::Relaxed);
        }
        if FINALIZING.load(Ordering::Relaxed) {
            // SAFETY: what CPython's take_gil does to a thread while it finalizes.
            unsafe { libc::pthread_exit(core::ptr::null_mut()) }
        }
        1
    }
    extern "C" fn release(_: c_int) {}
    extern "C" fn none() -> Object {
        core::ptr::null_mut()
    }
    extern "C" fn no_object(_: Object) -> Object {
        core::ptr::null_mut()
    }
    extern "C" fn lasti(_: Object) -> c_int {
        0
    }
    extern "C" fn line(_: Object, offset: c_int) -> c_int {
        if FINALIZED.load(Ordering::Relaxed) {
            CALLED_AFTER_FINALIZED.store(true, Ordering::Relaxed);
        }
        100 + offset
    }
    extern "C" fn no_attr(_: Object, _: *const c_char) -> Object {
        core::ptr::null_mut()
    }
    extern "C" fn no_text(_: Object) -> *const c_char {
        core::ptr::null()
    }
    extern "C" fn nothing(_: Object) {}
    extern "C" fn clear() {}

    /// An interpreter whose GIL another thread always holds, so that frames are resolved by
    /// the helper thread.
    static API: Api = Api {
        is_initialized: initialized,
        gil_check,
        gil_ensure: ensure,
        gil_release: release,
        this_thread_state: none,
        get_frame: none,
        frame_get_back: no_object,
        frame_get_code: no_object,
        frame_get_lasti: lasti,
        code_addr2line: line,
        get_attr_string: no_attr,
        unicode_as_utf8: no_text,
        dec_ref: nothing,
        err_clear: clear,
        code_type: CODE_TYPE,
        code_units: 0,
        layout: None,
    };

    #[test]
    fn the_interpreter_may_end_the_helper_thread_and_the_program_lives_on() {
        let code = CODE.as_ptr() as usize;
        assert_eq!(resolve_now(&API, code, 3).expect("resolved by the helper").line, Some(103));
        // Once it has finalized, nothing calls CPython: neither the thread that asks (whom
        // PyGILState_Check tells it holds the GIL) nor the helper, for a request made before.
        FINALIZED.store(true, Ordering::Relaxed);
        assert!(resolve_now(&API, code, 4).is_none());
        let (requests, _) = resolver(&API).expect("the helper");
        requests.try_send((code, 5)).expect("room for a request");
        std::thread::sleep(Duration::from_millis(50));
        assert!(!CALLED_AFTER_FINALIZED.load(Ordering::Relaxed), "the C API called after finalization");
        FINALIZED.store(false, Ordering::Relaxed);
        assert_eq!(resolve_now(&API, code, 6).expect("resolved again").line, Some(106));
        // At exit CPython ends the helper in PyGILState_Ensure: the process must not abort.
        FINALIZING.store(true, Ordering::Relaxed);
        assert!(resolve_now(&API, code, 7).is_none());
        while !HELPER_ENDED.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Requests after it go unanswered at once, more than the queue holds.
        for offset in 8..40 {
            assert!(resolve_now(&API, code, offset).is_none());
        }
    }
}
