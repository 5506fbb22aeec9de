//! Kernels: what a launch's parameters say about the memory it touches. Every 8-byte-aligned
//! word of the parameters that falls where buffers live is an access of the byte it points
//! at, its direction from the parameter's type in the kernel's demangled name; a word of a
//! by-value structure that once held data is not read as a pointer again ([`StaleWords`]). A
//! pointer the kernel talks to the host through (declared `volatile`, or used by volatile or
//! system-scoped accesses in its PTX) is a channel, which the host guard leaves alone.

use core::ffi::{c_char, c_void, CStr};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use streamsan::hash::{fast_map, FastMap};

use streamsan::model::op::{Access, KernelId, Mode};
use streamsan::model::Model;
use streamsan::phases::{self, Tally};
use streamsan_driver_api::{
    CUDA_ERROR_INVALID_HANDLE, CUDA_SUCCESS, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE,
    CU_LAUNCH_PARAM_END,
};

use crate::intercept::driver;

/// One parameter of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub offset: usize,
    pub size: usize,
    /// The demangled name gave the parameter's type.
    pub typed: bool,
    /// Declared as a pointer to const.
    pub read_only: bool,
    /// A pointer the kernel and the host talk through while it runs: declared as a pointer to
    /// volatile, or reaching volatile or system-scoped accesses in the kernel's PTX.
    pub channel: bool,
}

impl Param {
    /// Whether it has a `CUtensorMap`'s shape (128 bytes, 64-byte aligned): memory reached
    /// through it by bulk tensor copies is not seen by the footprint patch.
    pub fn is_tensor_map(&self) -> bool {
        self.size == 128 && self.offset.is_multiple_of(64)
    }
}

/// What streamsan knows of a kernel.
#[derive(Debug, Default)]
pub struct KernelInfo {
    pub id: Option<KernelId>,
    /// Empty when the driver could not say.
    pub params: Vec<Param>,
    /// One bit per 8-byte word of the parameters: set once the word, inside a by-value
    /// structure, held something other than null or an address where buffers live
    /// ([`StaleWords`]).
    data_words: StaleWords,
    /// The parameters lie one after another in their order, as the ABI lays them out: a
    /// parameter buffer's words are then read a parameter at a time ([`accesses`]).
    in_order: bool,
    /// Some parameter is a channel ([`Param::channel`]).
    has_channels: bool,
}

impl KernelInfo {
    fn new(id: Option<KernelId>, params: Vec<Param>) -> KernelInfo {
        let data_words = StaleWords::for_params(&params);
        let in_order = params.windows(2).all(|p| p[0].offset + p[0].size <= p[1].offset);
        let has_channels = params.iter().any(|p| p.channel);
        KernelInfo { id, params, data_words, in_order, has_channels }
    }

    /// The addresses that a launch's `accesses`, as [`accesses`] read them, take through
    /// channel parameters, into `out` (emptied first).
    pub fn channels(&self, accesses: &[Access], out: &mut Vec<u64>) {
        out.clear();
        if !self.has_channels {
            return;
        }
        let channel = |slot: u32| self.params.iter().any(|p| p.channel && p.offset == slot as usize);
        out.extend(accesses.iter().filter(|a| a.slot.is_some_and(channel)).map(|a| a.addr));
    }
}

/// The words of a kernel's by-value parameter structures that are data, not pointers.
///
/// A by-value structure may carry bytes the program never wrote for this launch: PyTorch's
/// `OffsetCalculator` fills only the dimensions a tensor has and leaves the rest of its
/// arrays as the host stack left them, and that is often the address of a tensor of an
/// earlier call. Such a stale address is no access of this launch: read as one, it would
/// meet fresh memory, be learnt as an output ([`streamsan::model::direction`]) and have every
/// later launch write through it (a false RAW with a side-stream prefetcher). A real pointer
/// field holds a pointer, or null, at every launch; a word that once held anything else (a
/// size, a stride, a host address, stack garbage) is data, and an address found in it later
/// is taken as stale. What this can miss: a field that holds
/// a buffer's address at some launches and other data at others (a union).
#[derive(Debug, Default)]
struct StaleWords(Box<[AtomicU64]>);

impl StaleWords {
    fn for_params(params: &[Param]) -> StaleWords {
        let bytes = params.iter().map(|p| p.offset + p.size).max().unwrap_or(0);
        StaleWords((0..bytes.div_ceil(8).div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    /// The data bits of the 64 words from word `64 * chunk` on: none past the parameters.
    fn chunk(&self, chunk: usize) -> u64 {
        self.0.get(chunk).map_or(0, |bits| bits.load(Ordering::Relaxed))
    }

    /// Marks the words of `bits` in that chunk as data.
    fn mark(&self, chunk: usize, bits: u64) {
        if let Some(held) = self.0.get(chunk) {
            held.fetch_or(bits, Ordering::Relaxed);
        }
    }
}

/// What kind of handle the program got from the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleKind {
    Function,
    Kernel,
}

struct Named {
    name: String,
    kind: HandleKind,
    /// The module or library the handle came from.
    owner: usize,
}

fn named() -> &'static FastMap<usize, Named> {
    static NAMED: OnceLock<FastMap<usize, Named>> = OnceLock::new();
    NAMED.get_or_init(fast_map)
}

fn infos() -> &'static FastMap<usize, Arc<KernelInfo>> {
    static INFO: OnceLock<FastMap<usize, Arc<KernelInfo>>> = OnceLock::new();
    INFO.get_or_init(fast_map)
}

/// Kernels' channel parameters by symbol, of each module or library loaded from PTX.
type Channels = Arc<HashMap<String, Vec<usize>>>;

fn code_channels() -> &'static FastMap<usize, Channels> {
    static CHANNELS: OnceLock<FastMap<usize, Channels>> = OnceLock::new();
    CHANNELS.get_or_init(fast_map)
}

streamsan::hot! {
    /// Bumped whenever what was learnt of a handle is forgotten: [`Recent`] entries of an older
    /// generation are not used.
    static GENERATION: AtomicU64 = AtomicU64::new(0);
}

/// The kernels one thread launched lately ([`streamsan::thread_cache`]): a training step
/// launches the same few hundred kernels every iteration (room for a few thousand, so that
/// they rarely evict each other).
#[derive(Default)]
pub struct Recent(streamsan::thread_cache::ThreadCache<usize, Arc<KernelInfo>, 2048>);

impl Recent {
    pub fn info(&mut self, model: &Model, f: *mut c_void) -> &KernelInfo {
        let generation = GENERATION.load(Ordering::Acquire);
        if self.0.get(&(f as usize), generation).is_none() {
            self.0.put(f as usize, generation, info(model, f));
        }
        self.0.get(&(f as usize), generation).expect("just put")
    }
}

/// A handle the program got by name from `owner` (`cuModuleGetFunction`,
/// `cuLibraryGetKernel`). What was learnt of an earlier kernel at the same handle goes.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
pub unsafe fn named_handle(handle: *mut c_void, name: *const c_char, kind: HandleKind, owner: *mut c_void) {
    if handle.is_null() || name.is_null() {
        return;
    }
    // SAFETY: the driver accepted `name` as a NUL-terminated kernel name.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    // Asked again for the same kernel (cudart does, often): what was learnt still holds, and
    // forgetting it would send every thread's next launches to the shared tables.
    if named().get(&(handle as usize)).is_some_and(|n| n.name == name && n.kind == kind && n.owner == owner as usize) {
        return;
    }
    let name = name.into_owned();
    infos().remove(&(handle as usize));
    named().insert(handle as usize, Named { name, kind, owner: owner as usize });
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

thread_local! {
    /// The `cuKernelGetFunction` answers this thread was told lately: kernel -> function, at
    /// the [`GENERATION`] they were found to change nothing.
    static ANSWERS: RefCell<streamsan::thread_cache::ThreadCache<usize, usize, 512>> = RefCell::default();
}

/// `cuKernelGetFunction`: the function handle stands for the kernel. PyTorch asks before
/// many launches, for the same pair every time: that changes nothing, and a thread that
/// was told the pair since anything was learnt or forgotten ([`GENERATION`]) only looks at
/// its own memory, not the shared maps (with a copy of the kernel's name).
pub fn function_of_kernel(function: *mut c_void, kernel: *mut c_void) {
    let generation = GENERATION.load(Ordering::Acquire);
    let told = |answers: &RefCell<streamsan::thread_cache::ThreadCache<usize, usize, 512>>| {
        answers.borrow().get(&(kernel as usize), generation) == Some(&(function as usize))
    };
    if ANSWERS.try_with(told).unwrap_or(false) {
        return;
    }
    learn_function_of_kernel(function, kernel);
    // Remembered at the generation read before: if the call above (or another thread)
    // changed anything, the entry is stale at once and the next call checks again.
    let _ = ANSWERS.try_with(|answers| answers.borrow_mut().put(kernel as usize, generation, function as usize));
}

fn learn_function_of_kernel(function: *mut c_void, kernel: *mut c_void) {
    let known = named().get(&(kernel as usize)).map(|n| (n.name.clone(), n.owner));
    if let Some((name, owner)) = &known {
        if named()
            .get(&(function as usize))
            .is_some_and(|n| n.name == *name && n.owner == *owner && n.kind == HandleKind::Function)
        {
            return;
        }
    }
    infos().remove(&(function as usize));
    if let Some((name, owner)) = known {
        named().insert(function as usize, Named { name, kind: HandleKind::Function, owner });
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The driver loaded the module or library `owner` from `image`, with the host guard on:
/// the channels its PTX shows are kept for its kernels' first launches. A cubin or a
/// fatbinary shows none.
pub fn code_loaded(owner: *mut c_void, image: &[u8]) {
    match streamsan_footprint::channels::of(image) {
        Some(channels) if !channels.is_empty() => {
            code_channels().insert(owner as usize, Arc::new(channels));
        }
        _ => {
            code_channels().remove(&(owner as usize));
        }
    }
}

/// A module or library was unloaded (`owner`), or every one of a context (None): handles
/// from it may come back for other kernels. Layouts are cheap to learn again, so all go.
pub fn code_unloaded(owner: Option<*mut c_void>) {
    match owner {
        Some(owner) => {
            named().retain(|_, n| n.owner != owner as usize);
            code_channels().remove(&(owner as usize));
        }
        None => {
            named().clear();
            code_channels().clear();
        }
    }
    infos().clear();
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The kernel behind a launch handle, learnt on its first launch.
pub fn info(model: &Model, f: *mut c_void) -> Arc<KernelInfo> {
    if let Some(info) = infos().get(&(f as usize)) {
        return info.clone();
    }
    let info = Arc::new(learn(model, f));
    infos().insert(f as usize, info.clone());
    info
}

fn learn(model: &Model, f: *mut c_void) -> KernelInfo {
    let queries = driver::queries();
    let known = named().get(&(f as usize)).map(|n| (n.name.clone(), n.kind, n.owner));
    let kind_hint = known.as_ref().map(|k| k.1);
    // The layout: ask as a CUfunction unless the handle is known to be a CUkernel, and fall
    // back to the CUkernel query on INVALID_HANDLE.
    let mut layout = Vec::new();
    let mut kind = kind_hint.unwrap_or(HandleKind::Function);
    if kind == HandleKind::Function {
        match param_layout(queries.func_get_param_info, f) {
            Ok(params) => layout = params,
            Err(CUDA_ERROR_INVALID_HANDLE) => kind = HandleKind::Kernel,
            Err(_) => {}
        }
    }
    if kind == HandleKind::Kernel {
        layout = param_layout(queries.kernel_get_param_info, f).unwrap_or_default();
    }
    let owner = known.as_ref().map(|k| k.2);
    let mangled = known.map(|k| k.0).or_else(|| {
        query_name(if kind == HandleKind::Kernel { queries.kernel_get_name } else { queries.func_get_name }, f)
    });
    let demangled = mangled.as_ref().map(|m| backtrace::SymbolName::new(m.as_bytes()).to_string());
    let declared = demangled.as_deref().and_then(declared_params).filter(|d| d.len() == layout.len());
    let in_code = owner
        .and_then(|owner| code_channels().get(&owner).map(|c| c.clone()))
        .zip(mangled.as_ref())
        .and_then(|(channels, symbol)| channels.get(symbol).cloned())
        .unwrap_or_default();
    let params: Vec<Param> = layout
        .into_iter()
        .enumerate()
        .map(|(i, (offset, size))| {
            let declared = declared.as_ref().map(|d| d[i]);
            Param {
                offset,
                size,
                typed: declared.is_some(),
                read_only: declared.is_some_and(|d| d.read_only),
                // Only a whole pointer: a structure's words are not told apart.
                channel: size == 8 && (declared.is_some_and(|d| d.volatile) || in_code.contains(&i)),
            }
        })
        .collect();
    let id = mangled.zip(demangled).map(|(symbol, name)| model.kernel_id(&name, &symbol));
    KernelInfo::new(id, params)
}

type ParamInfo = unsafe extern "C" fn(*mut c_void, usize, *mut usize, *mut usize) -> u32;

/// (offset, size) of every parameter; the driver's status if the first query fails.
fn param_layout(query: Option<ParamInfo>, f: *mut c_void) -> Result<Vec<(usize, usize)>, u32> {
    let Some(query) = query else { return Err(CUDA_ERROR_INVALID_HANDLE) };
    let mut params = Vec::new();
    for index in 0..4096 {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: valid out-pointers; the driver checks the handle and index.
        let status = unsafe { query(f, index, &mut offset, &mut size) };
        if status != CUDA_SUCCESS {
            return if index == 0 && status == CUDA_ERROR_INVALID_HANDLE { Err(status) } else { Ok(params) };
        }
        params.push((offset, size));
    }
    Ok(params)
}

fn query_name(
    query: Option<unsafe extern "C" fn(*mut *const c_char, *mut c_void) -> u32>,
    f: *mut c_void,
) -> Option<String> {
    let query = query?;
    let mut name: *const c_char = core::ptr::null();
    // SAFETY: a valid out-pointer.
    let status = unsafe { query(&mut name, f) };
    // SAFETY: on success the driver returns a NUL-terminated name it owns.
    (status == CUDA_SUCCESS && !name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
}

/// What a demangled signature declares of a pointer parameter's pointee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// `const`: the kernel only reads through it.
    pub read_only: bool,
    /// `volatile`: the kernel reads memory that changes under it (a flag the host sets).
    pub volatile: bool,
}

/// What each parameter of a demangled signature points to: `scale(float*, float const*, int)`
/// gives a read-only second parameter, `poll(unsigned int volatile*)` a volatile one. None
/// without a parameter list (an `extern "C"` kernel).
pub fn declared_params(demangled: &str) -> Option<Vec<Declared>> {
    let s = demangled.trim_end();
    if !s.ends_with(')') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut depth = 0i32;
    let mut open = None;
    for i in (0..bytes.len()).rev() {
        match bytes[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    open = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = s[open? + 1..s.len() - 1].trim();
    if inner.is_empty() || inner == "void" {
        return Some(Vec::new());
    }
    let mut params = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                params.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    params.push(&inner[start..]);
    Some(
        params
            .into_iter()
            .map(|p| {
                let p = p.trim().trim_end_matches("__restrict__").trim_end_matches("restrict").trim_end();
                let to = |qualifier: &str| p.strip_suffix('*').is_some_and(|p| p.trim_end().ends_with(qualifier));
                Declared { read_only: to("const"), volatile: to("volatile") }
            })
            .collect(),
    )
}

/// The parameter buffer and its size in a launch's `extra`:
/// {BUFFER_POINTER, buf, BUFFER_SIZE, &size, END}. None without one.
///
/// # Safety
/// `extra` is null or a launch's `extra`, terminated by CU_LAUNCH_PARAM_END.
pub unsafe fn extra_buffer(extra: *mut *mut c_void) -> Option<(*const u8, usize)> {
    if extra.is_null() {
        return None;
    }
    let (mut buffer, mut size) = (core::ptr::null::<u8>(), 0usize);
    for i in (0..64).step_by(2) {
        // SAFETY: the list is terminated by CU_LAUNCH_PARAM_END.
        let key = unsafe { *extra.add(i) } as usize;
        if key == CU_LAUNCH_PARAM_END {
            break;
        }
        let value = unsafe { *extra.add(i + 1) };
        match key {
            CU_LAUNCH_PARAM_BUFFER_POINTER => buffer = value as *const u8,
            CU_LAUNCH_PARAM_BUFFER_SIZE if !value.is_null() => size = unsafe { *(value as *const usize) },
            _ => {}
        }
    }
    (!buffer.is_null()).then_some((buffer, size))
}

/// The accesses of a launch: each word of the parameters that may point into a buffer.
///
/// # Safety
/// `params` and `extra` are the launch's own arguments, valid as the driver requires.
pub unsafe fn accesses(
    model: &Model,
    info: &KernelInfo,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    out: &mut Vec<Access>,
) {
    let layout = &info.params[..];
    let mut scan = Scan { range: model.buffer_range(), data_words: &info.data_words, params: layout, out, words: 0 };
    if !params.is_null() && !info.params.is_empty() {
        for (i, p) in info.params.iter().enumerate() {
            // SAFETY: one pointer per parameter, each to the parameter's value.
            let value = unsafe { *params.add(i) } as *const u8;
            if value.is_null() {
                continue;
            }
            // SAFETY (both): the parameter's `size` bytes.
            if p.size == 8 && p.offset % 8 == 0 {
                scan.pointer(unsafe { (value as *const u64).read_unaligned() }, p.offset, p);
                continue;
            }
            unsafe { scan.fields(value, p.offset, p.size) };
        }
        phases::tally(Tally::ParamWords, scan.words);
        return;
    }
    // SAFETY: the caller's promise.
    let Some((buffer, size)) = (unsafe { extra_buffer(extra) }) else { return };
    // Every whole word of the buffer is read: as a pointer where a pointer parameter holds it
    // whole, else as a field (of a by-value structure, or of padding, or across two).
    if info.in_order {
        let mut from = 0;
        for p in info.params.iter().filter(|p| p.size == 8 && p.offset % 8 == 0 && p.offset + 8 <= size) {
            // SAFETY (both): the words between `from` and the pointer, then the pointer,
            // inside the `size` bytes of the buffer.
            unsafe { scan.fields(buffer.add(from), from, p.offset - from) };
            scan.pointer(unsafe { (buffer.add(p.offset) as *const u64).read_unaligned() }, p.offset, p);
            from = p.offset + 8;
        }
        // SAFETY: the words after the last pointer, inside the buffer.
        unsafe { scan.fields(buffer.add(from), from, size.saturating_sub(from)) };
    } else {
        let mut offset = 0;
        while offset + 8 <= size {
            // SAFETY: inside the `size` bytes of the buffer.
            let word = unsafe { (buffer.add(offset) as *const u64).read_unaligned() };
            match info.params.iter().find(|p| p.offset <= offset && offset + 8 <= p.offset + p.size) {
                Some(p) if p.size == 8 => scan.pointer(word, offset, p),
                _ => scan.field(word, offset),
            }
            offset += 8;
        }
    }
    phases::tally(Tally::ParamWords, scan.words);
}

/// A launch's parameter words, judged against where buffers lie (read once a launch); a
/// structure's words known to hold data are skipped unread (`slot`: a word's byte offset in
/// the parameters).
struct Scan<'a> {
    range: core::ops::Range<u64>,
    data_words: &'a StaleWords,
    /// The kernel's layout: where its tensor maps lie.
    params: &'a [Param],
    out: &'a mut Vec<Access>,
    words: usize,
}

impl Scan<'_> {
    /// A whole pointer parameter: it surely points where it says. Read only if the kernel's
    /// name declares it pointer-to-const, read-write if it gives another type; an extern "C"
    /// kernel's may read or write.
    #[inline]
    fn pointer(&mut self, addr: u64, slot: usize, param: &Param) {
        self.words += 1;
        if self.range.contains(&addr) {
            let mode = match (param.typed, param.read_only) {
                (true, true) => Mode::Read,
                (true, false) => Mode::ReadWrite,
                (false, _) => Mode::Unknown,
            };
            self.out.push(Access { slot: Some(slot as u32), ..Access::new(addr, 1, mode) });
        }
    }

    /// A word of a by-value structure, or one no parameter holds whole: it may be a stale
    /// field, and is not taken as a pointer once it held data. It may read or write.
    #[inline]
    fn field(&mut self, addr: u64, slot: usize) {
        let word = slot / 8;
        self.words += 1;
        if self.data_words.chunk(word / 64) & (1 << (word % 64)) == 0 {
            self.judge_field(addr, slot);
        }
    }

    /// The whole words of a by-value parameter of `size` bytes at `offset`, at `value`. Only
    /// the fields not known to hold data are read: most words of a framework's structures
    /// (sizes, strides, scalars) are data, and cost nothing once the kernel has been launched.
    ///
    /// # Safety
    /// `value` points to the parameter's `size` bytes.
    #[inline]
    unsafe fn fields(&mut self, value: *const u8, offset: usize, size: usize) {
        let (mut word, end) = (offset.div_ceil(8), (offset + size) / 8);
        self.words += end.saturating_sub(word);
        while word < end {
            let (chunk, base) = (word / 64, word / 64 * 64);
            let stop = end.min(base + 64);
            let below = |n: usize| if n == 64 { u64::MAX } else { (1 << n) - 1 };
            let mut open = below(stop - base) & !below(word - base) & !self.data_words.chunk(chunk);
            while open != 0 {
                let at = (base + open.trailing_zeros() as usize) * 8;
                open &= open - 1;
                // SAFETY: a whole word inside the parameter's `size` bytes.
                self.judge_field(unsafe { (value.add(at - offset) as *const u64).read_unaligned() }, at);
            }
            word = stop;
        }
    }

    /// A field not known to hold data: an access if it points where buffers lie, data from
    /// now on if it holds anything else but null.
    #[inline]
    fn judge_field(&mut self, addr: u64, slot: usize) {
        if self.range.contains(&addr) {
            let blind = self.params.iter().any(|p| p.is_tensor_map() && (p.offset..p.offset + p.size).contains(&slot));
            let access = Access { blind, ..Access::field(addr, slot as u32) };
            self.out.push(access);
        } else if addr != 0 {
            let word = slot / 8;
            self.data_words.mark(word / 64, 1 << (word % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_only_params(demangled: &str) -> Option<Vec<bool>> {
        declared_params(demangled).map(|d| d.iter().map(|d| d.read_only).collect())
    }

    fn volatile_params(demangled: &str) -> Option<Vec<bool>> {
        declared_params(demangled).map(|d| d.iter().map(|d| d.volatile).collect())
    }

    #[test]
    fn const_pointer_parameters_are_read_only() {
        assert_eq!(read_only_params("scale(float*, float const*, int)"), Some(vec![false, true, false]));
        assert_eq!(
            read_only_params("void k<float, 2>(std::array<char*, 2ul>, float const* __restrict__, float* const)"),
            Some(vec![false, true, false])
        );
        assert_eq!(read_only_params("empty()"), Some(vec![]));
        assert_eq!(read_only_params("extern_c_kernel"), None);
    }

    #[test]
    fn volatile_pointer_parameters_are_channels() {
        assert_eq!(
            volatile_params("k(unsigned int volatile*, int const volatile* __restrict__, int* volatile, int*)"),
            Some(vec![true, true, false, false])
        );
        assert_eq!(read_only_params("k(int const volatile*)"), Some(vec![false]), "read, and written by another");
    }

    /// XLA's `DelayKernel`: its semaphore is a pointer to volatile.
    #[test]
    fn a_delay_kernel_s_semaphore_is_a_channel() {
        let symbol = b"_ZN15stream_executor3gpu12_GLOBAL__N_111DelayKernelEPVNS_17GpuSemaphoreStateES2_";
        let demangled = backtrace::SymbolName::new(symbol).to_string();
        assert_eq!(
            demangled,
            "stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::GpuSemaphoreState volatile*, \
             stream_executor::GpuSemaphoreState)"
        );
        assert_eq!(volatile_params(&demangled), Some(vec![true, false]));
    }

    /// A launch's channels: the accesses through its channel pointer parameters only.
    #[test]
    fn a_launch_s_channels_are_its_accesses_through_channel_parameters() {
        let (model, base) = model_with_a_buffer();
        let mut info = kernel(false, 16, 16);
        info.params[0].channel = true;
        let info = KernelInfo::new(None, info.params);
        let accesses = in_a_buffer(&model, &info, &mut [base, 3, base + 8, base + 16]);
        let mut channels = vec![1];
        info.channels(&accesses, &mut channels);
        assert_eq!(channels, [base]);
        kernel(false, 16, 16).channels(&accesses, &mut channels);
        assert!(channels.is_empty(), "none without channel parameters");
    }

    /// A thread that was told a kernel's function before does not ask the shared maps
    /// again, unless something was learnt or forgotten since: here the kernel's library
    /// went (and with it the function's name), and the handle came back for another kernel.
    #[test]
    fn a_function_asked_for_again_after_its_kernel_changed_takes_the_new_name() {
        let (kernel, function, old, new) = (0x5a00 as *mut c_void, 0x5b00 as *mut c_void, 0x5c00, 0x5d00);
        let name_of_function = || named().get(&(function as usize)).map(|n| n.name.clone());
        unsafe { named_handle(kernel, c"first".as_ptr(), HandleKind::Kernel, old as *mut c_void) };
        function_of_kernel(function, kernel);
        function_of_kernel(function, kernel);
        assert_eq!(name_of_function().as_deref(), Some("first"));
        code_unloaded(Some(old as *mut c_void));
        unsafe { named_handle(kernel, c"second".as_ptr(), HandleKind::Kernel, new as *mut c_void) };
        function_of_kernel(function, kernel);
        assert_eq!(name_of_function().as_deref(), Some("second"));
        // Another kernel of the same library handed the same function: the new name, not
        // the one that shares the library and kind.
        let other = 0x5e00 as *mut c_void;
        unsafe { named_handle(other, c"third".as_ptr(), HandleKind::Kernel, new as *mut c_void) };
        function_of_kernel(function, other);
        assert_eq!(name_of_function().as_deref(), Some("third"));
    }

    /// `k(float* or float const*, int, Fields)`, `Fields` of `size` bytes at `offset`, learnt
    /// as the driver and the kernel's name would give it.
    fn kernel(read_only: bool, offset: usize, size: usize) -> KernelInfo {
        let params = vec![
            Param { offset: 0, size: 8, typed: true, read_only, channel: false },
            Param { offset: 8, size: 4, typed: true, read_only: false, channel: false },
            Param { offset, size, typed: false, read_only: false, channel: false },
        ];
        KernelInfo::new(None, params)
    }

    /// The accesses of a launch whose parameters are `words`, passed in one buffer (`extra`,
    /// as cuBLAS and Triton pass them).
    fn in_a_buffer(model: &Model, info: &KernelInfo, words: &mut [u64]) -> Vec<Access> {
        let mut size = core::mem::size_of_val(words);
        let mut extra = [
            CU_LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
            words.as_mut_ptr().cast(),
            CU_LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
            (&raw mut size).cast(),
            CU_LAUNCH_PARAM_END as *mut c_void,
        ];
        let mut out = Vec::new();
        // SAFETY: a parameter buffer of `size` bytes, its list ended by END.
        unsafe { accesses(model, info, core::ptr::null_mut(), extra.as_mut_ptr(), &mut out) };
        out
    }

    /// The accesses of a launch whose parameters are `params`, one pointer each
    /// (`kernelParams`).
    ///
    /// # Safety
    /// Each pointer points to as many bytes as its parameter's size.
    unsafe fn in_params(model: &Model, info: &KernelInfo, params: &mut [*mut c_void]) -> Vec<Access> {
        let mut out = Vec::new();
        // SAFETY: the caller's promise.
        unsafe { accesses(model, info, params.as_mut_ptr(), core::ptr::null_mut(), &mut out) };
        out
    }

    /// The accesses a scan found, as (offset from `base`, mode, whole pointer, word).
    fn found(out: Vec<Access>, base: u64) -> Vec<(u64, Mode, bool, Option<u32>)> {
        out.into_iter().map(|a| (a.addr - base, a.mode, a.exact, a.slot)).collect()
    }

    /// A model with one 4 KiB device buffer, and the buffer's address.
    fn model_with_a_buffer() -> (Model, u64) {
        use streamsan::model::buffers::MemoryKind;
        use streamsan::model::op::{Origin, StackId, ThreadId};
        use streamsan::model::Alloc;
        let model = Model::new(Box::new(|_| None), None);
        let origin = Origin { api: "cuMemAlloc_v2", thread: ThreadId(1), site: StackId(0) };
        let base = 0x7f00_0000_0000u64;
        model.alloc(Alloc { base, size: 4096, kind: MemoryKind::Device, ctx: 1 }, None, &origin);
        (model, base)
    }

    /// A pointer inside a by-value parameter shaped as a tensor map (128 bytes, 64-byte
    /// aligned) is one the footprint patch is blind to; inside any other structure it is not.
    #[test]
    fn a_pointer_in_a_tensor_map_is_marked_blind() {
        let (model, base) = model_with_a_buffer();
        for (offset, size, blind) in [(64, 128, true), (16, 128, false), (64, 120, false)] {
            let info = kernel(true, offset, size);
            let mut words = vec![0u64; (offset + size) / 8];
            words[offset / 8 + 1] = base + 8;
            let found = in_a_buffer(&model, &info, &mut words);
            let marks: Vec<(u64, bool)> = found.iter().map(|a| (a.addr - base, a.blind)).collect();
            assert_eq!(marks, [(8, blind)], "{size} bytes at {offset}");
        }
    }

    /// A launch whose parameters come in one buffer (`extra`, as cuBLAS and Triton pass
    /// them): each word is read with the parameter that holds it whole, a pointer parameter
    /// as itself, a word of a by-value structure as a field that may be stale; a field that
    /// held data is not read as a pointer at a later launch.
    #[test]
    fn a_parameter_buffer_is_read_with_the_parameters_it_holds() {
        let (model, base) = model_with_a_buffer();
        // `k(float const*, int, Fields)`, `Fields` 24 bytes at offset 16.
        let info = kernel(true, 16, 24);
        let launch = |mut words: [u64; 5]| found(in_a_buffer(&model, &info, &mut words), base);
        // The pointer; the int's word; the structure's three fields: a size, a buffer's address, null.
        assert_eq!(
            launch([base, 7, 64, base + 256, 0]),
            [(0, Mode::Read, true, Some(0)), (256, Mode::Unknown, false, Some(24))]
        );
        // The field that held a size now holds an address: stale, not read.
        assert_eq!(
            launch([base + 8, 7, base + 512, base + 264, base + 1024]),
            [
                (8, Mode::Read, true, Some(0)),
                (264, Mode::Unknown, false, Some(24)),
                (1024, Mode::Unknown, false, Some(32))
            ]
        );
    }

    /// A launch whose parameters come one pointer each (`kernelParams`): only the words a
    /// parameter holds whole are read, a structure's from where its first whole word starts
    /// (here 4 bytes into it), and a field that held data is not read at a later launch.
    #[test]
    fn parameters_are_read_by_the_words_they_hold() {
        let (model, base) = model_with_a_buffer();
        // `k(float*, int, Fields)`, `Fields` 28 bytes at offset 12: its words at 16, 24, 32.
        let info = kernel(false, 12, 28);
        let launch = |pointer: u64, fields: [u64; 3]| {
            let (mut pointer, mut int) = (pointer, 7u32);
            let mut structure = [0u8; 28];
            for (i, field) in fields.iter().enumerate() {
                structure[4 + 8 * i..12 + 8 * i].copy_from_slice(&field.to_ne_bytes());
            }
            let mut params = [(&raw mut pointer).cast(), (&raw mut int).cast(), structure.as_mut_ptr().cast()];
            // SAFETY: one pointer per parameter, each to as many bytes as its size.
            found(unsafe { in_params(&model, &info, &mut params) }, base)
        };
        assert_eq!(
            launch(base, [64, base + 256, 0]),
            [(0, Mode::ReadWrite, true, Some(0)), (256, Mode::Unknown, false, Some(24))]
        );
        // The field that held a size now holds an address: stale, not read.
        assert_eq!(
            launch(base + 8, [base + 512, base + 264, base + 1024]),
            [
                (8, Mode::ReadWrite, true, Some(0)),
                (264, Mode::Unknown, false, Some(24)),
                (1024, Mode::Unknown, false, Some(32))
            ]
        );
    }

    /// A structure of more than 64 words: its words are judged 64 to a chunk, a field that
    /// held data in the second chunk is not read again, one that held null still is.
    #[test]
    fn a_structure_of_many_words_is_read_across_its_chunks() {
        let (model, base) = model_with_a_buffer();
        // `k(Big)`, `Big` 1024 bytes (128 words).
        let info = KernelInfo::new(
            None,
            vec![Param { offset: 0, size: 1024, typed: false, read_only: false, channel: false }],
        );
        let launch = |fields: &[(usize, u64)]| {
            let mut structure = [0u64; 128];
            for &(word, value) in fields {
                structure[word] = value;
            }
            // SAFETY: one pointer to the parameter's 1024 bytes.
            found(unsafe { in_params(&model, &info, &mut [structure.as_mut_ptr().cast()]) }, base)
        };
        assert_eq!(
            launch(&[(3, base), (65, 4096), (70, base + 8)]),
            [(0, Mode::Unknown, false, Some(24)), (8, Mode::Unknown, false, Some(560))]
        );
        assert_eq!(
            launch(&[(0, base + 16), (65, base + 24), (127, base + 32)]),
            [(16, Mode::Unknown, false, Some(0)), (32, Mode::Unknown, false, Some(1016))]
        );
    }

    /// Parameters the driver gave out of their order in the buffer: each word is still read
    /// with the parameter that holds it whole.
    #[test]
    fn a_parameter_buffer_is_read_whatever_the_order_of_its_parameters() {
        let (model, base) = model_with_a_buffer();
        // `Fields` 16 bytes at offset 8, listed before the pointer at offset 0.
        let info = KernelInfo::new(
            None,
            vec![
                Param { offset: 8, size: 16, typed: true, read_only: false, channel: false },
                Param { offset: 0, size: 8, typed: true, read_only: true, channel: false },
            ],
        );
        assert!(!info.in_order);
        let found = found(in_a_buffer(&model, &info, &mut [base, base + 8, 64]), base);
        assert_eq!(found, [(0, Mode::Read, true, Some(0)), (8, Mode::Unknown, false, Some(8))]);
    }

    #[test]
    fn mangled_names_demangle_to_their_signature() {
        let demangled = backtrace::SymbolName::new(b"_Z5scalePfPKfi").to_string();
        assert_eq!(demangled, "scale(float*, float const*, int)");
        assert_eq!(read_only_params(&demangled), Some(vec![false, true, false]));
        let polled = backtrace::SymbolName::new(b"_Z9poll_flagPVj").to_string();
        assert_eq!(polled, "poll_flag(unsigned int volatile*)");
        assert_eq!(volatile_params(&polled), Some(vec![true]));
    }
}
