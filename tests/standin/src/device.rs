//! The stand-in's state: memory, handles and the calling thread's context.
//!
//! Device memory is a range of real, readable and writable host address space, reserved
//! once, so that copies and memsets can move real bytes and programs can check their
//! results. Allocations are handed out from it with per-size free lists, so that freed
//! addresses come back, as they do from the real driver's pools. Handles (contexts,
//! streams, events, modules, kernels, graphs) are distinct addresses that never point at
//! anything.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::ptx::Entry;

/// Bytes of address space reserved for device memory.
const ARENA_BYTES: usize = 16 << 30;
/// Allocation granularity, as the driver's small allocations.
const ALIGN: u64 = 256;
/// First handle value; handles step by 16 from here.
const FIRST_HANDLE: usize = 0x5eed_0000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    Device,
    Host,
    /// Host memory the device reaches through its own view, as pinned memory: the host's
    /// loads and stores reach it directly, as on a GPU.
    Managed,
}

#[derive(Clone, Copy, Debug)]
pub struct Allocation {
    pub size: u64,
    pub kind: MemoryKind,
}

#[derive(Clone, Debug)]
pub enum Object {
    Context {
        device: i32,
    },
    Stream {
        ctx: usize,
        flags: u32,
        priority: i32,
        capturing: bool,
    },
    Event,
    Module {
        functions: HashMap<String, Entry>,
        /// Its `.global` variables' device addresses, by name.
        variables: HashMap<String, (u64, usize)>,
    },
    Library {
        kernels: HashMap<String, Entry>,
    },
    /// A `CUfunction` of the module or library `owner`. `kernel`: the `CUkernel` it came
    /// from, if any.
    Function {
        entry: Entry,
        kernel: Option<usize>,
        owner: usize,
    },
    /// A `CUkernel` (`cuLibraryGetKernel`), which cudart passes where `CUfunction` is declared.
    Kernel {
        entry: Entry,
        owner: usize,
    },
    Graph,
    /// A node of the graph `graph`.
    GraphNode {
        graph: usize,
    },
    GraphExec,
    MemHandle {
        size: u64,
    },
    MemPool {
        device: i32,
    },
    /// A CUDA array: `size` bytes of device memory at `base`, its elements (of `element`
    /// bytes) in row-major order (a GPU's are tiled; a program cannot tell), `row` bytes per
    /// row, `rows` rows per slice.
    Array {
        base: u64,
        size: u64,
        element: u64,
        row: u64,
        rows: u64,
    },
    /// A mipmapped array: its levels, arrays of their own.
    Mipmap {
        levels: Vec<usize>,
    },
    ExternalSemaphore,
}

pub struct State {
    arena_base: u64,
    next: u64,
    free: HashMap<u64, Vec<u64>>,
    pub allocations: BTreeMap<u64, Allocation>,
    pub objects: HashMap<usize, Object>,
    next_handle: usize,
    /// Handles of unloaded code, handed out again first (last retired, first reused), as a
    /// driver's allocator reuses freed addresses.
    retired: Vec<usize>,
    primary: HashMap<i32, usize>,
    pools: HashMap<i32, usize>,
}

/// The device's state, to change it.
pub fn state() -> RwLockWriteGuard<'static, State> {
    shared().write().unwrap_or_else(|e| e.into_inner())
}

/// The device's state, to look at it: launches and stream checks from many threads at once
/// do not queue behind each other (the benchmark's many-thread figure would otherwise be
/// this lock's).
pub fn state_read() -> RwLockReadGuard<'static, State> {
    shared().read().unwrap_or_else(|e| e.into_inner())
}

fn shared() -> &'static RwLock<State> {
    static STATE: OnceLock<RwLock<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        // SAFETY: an anonymous private mapping; MAP_NORESERVE: pages appear on first touch.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                ARENA_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert!(base != libc::MAP_FAILED, "stand-in: cannot reserve device memory");
        RwLock::new(State {
            arena_base: base as u64,
            next: base as u64,
            free: HashMap::new(),
            allocations: BTreeMap::new(),
            objects: HashMap::new(),
            next_handle: FIRST_HANDLE,
            retired: Vec::new(),
            primary: HashMap::new(),
            pools: HashMap::new(),
        })
    })
}

/// How many devices the stand-in has (`STANDIN_DEVICES`, default 2).
pub fn device_count() -> i32 {
    std::env::var("STANDIN_DEVICES").ok().and_then(|n| n.parse().ok()).unwrap_or(2)
}

impl State {
    pub fn new_handle(&mut self, object: Object) -> usize {
        let handle = self.retired.pop().unwrap_or_else(|| {
            self.next_handle += 16;
            self.next_handle - 16
        });
        self.objects.insert(handle, object);
        handle
    }

    /// Unloads a module or library: its functions and kernels go, their handles and its own
    /// to be handed out again.
    pub fn unload(&mut self, owner: usize) {
        let mut code: Vec<usize> = self
            .objects
            .iter()
            .filter(|(_, o)| matches!(o, Object::Function { owner: of, .. } | Object::Kernel { owner: of, .. } if *of == owner))
            .map(|(&h, _)| h)
            .collect();
        code.sort_unstable();
        code.push(owner);
        for handle in code {
            self.objects.remove(&handle);
            self.retired.push(handle);
        }
    }

    /// Device memory of `size` bytes; a freed block of the same rounded size comes back first.
    pub fn alloc_device(&mut self, size: u64) -> Option<u64> {
        let rounded = size.max(1).div_ceil(ALIGN) * ALIGN;
        let addr = match self.free.get_mut(&rounded).and_then(Vec::pop) {
            Some(addr) => addr,
            None => {
                if self.next + rounded > self.arena_base + ARENA_BYTES as u64 {
                    return None;
                }
                let addr = self.next;
                self.next += rounded;
                addr
            }
        };
        self.allocations.insert(addr, Allocation { size, kind: MemoryKind::Device });
        Some(addr)
    }

    /// Managed memory of `size` bytes.
    pub fn alloc_managed(&mut self, size: u64) -> Option<u64> {
        let p = crate::pinned::alloc(size)?;
        self.allocations.insert(p, Allocation { size, kind: MemoryKind::Managed });
        Some(p)
    }

    pub fn free_device(&mut self, addr: u64) -> bool {
        match self.allocations.get(&addr) {
            Some(&a) if a.kind == MemoryKind::Managed => {
                self.allocations.remove(&addr);
                crate::pinned::release(addr, a.size);
                true
            }
            Some(a) if a.kind == MemoryKind::Device => {
                let rounded = a.size.max(1).div_ceil(ALIGN) * ALIGN;
                self.allocations.remove(&addr);
                self.free.entry(rounded).or_default().push(addr);
                true
            }
            _ => false,
        }
    }

    /// Host memory (pinned, as far as a program can tell).
    pub fn alloc_host(&mut self, size: u64) -> Option<u64> {
        let p = crate::pinned::alloc(size)?;
        self.allocations.insert(p, Allocation { size, kind: MemoryKind::Host });
        Some(p)
    }

    pub fn free_host(&mut self, addr: u64) -> bool {
        match self.allocations.get(&addr) {
            Some(&a) if a.kind == MemoryKind::Host => {
                self.allocations.remove(&addr);
                crate::pinned::release(addr, a.size);
                true
            }
            _ => false,
        }
    }

    /// Whether `[addr, addr + len)` lies inside one allocation.
    pub fn is_allocated(&self, addr: u64, len: u64) -> bool {
        self.allocations.range(..=addr).next_back().is_some_and(|(&base, a)| addr + len <= base + a.size.max(1))
    }

    pub fn primary_context(&mut self, device: i32) -> usize {
        if let Some(&ctx) = self.primary.get(&device) {
            return ctx;
        }
        let ctx = self.new_handle(Object::Context { device });
        self.primary.insert(device, ctx);
        ctx
    }

    /// The device's default memory pool, made on first use.
    pub fn default_pool(&mut self, device: i32) -> usize {
        if let Some(&pool) = self.pools.get(&device) {
            return pool;
        }
        let pool = self.new_handle(Object::MemPool { device });
        self.pools.insert(device, pool);
        pool
    }

    pub fn device_of(&self, ctx: usize) -> Option<i32> {
        match self.objects.get(&ctx) {
            Some(Object::Context { device }) => Some(*device),
            _ => None,
        }
    }
}

/// Contexts a thread may push.
const STACK_DEPTH: usize = 16;

thread_local! {
    /// The calling thread's context stack; the top is current. Plain values with no
    /// destructor, so that, as with a driver, it outlives the thread's other thread-locals
    /// (programs call the driver from exit handlers).
    static CONTEXTS: Cell<[usize; STACK_DEPTH]> = const { Cell::new([0; STACK_DEPTH]) };
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

pub fn current_context() -> usize {
    match DEPTH.get() {
        0 => 0,
        depth => CONTEXTS.get()[depth - 1],
    }
}

pub fn set_current_context(ctx: usize) {
    pop_context();
    if ctx != 0 {
        push_context(ctx);
    }
}

pub fn push_context(ctx: usize) {
    let depth = DEPTH.get();
    assert!(depth < STACK_DEPTH, "the stand-in's context stack is full");
    let mut stack = CONTEXTS.get();
    stack[depth] = ctx;
    CONTEXTS.set(stack);
    DEPTH.set(depth + 1);
}

pub fn pop_context() -> usize {
    match DEPTH.get() {
        0 => 0,
        depth => {
            DEPTH.set(depth - 1);
            CONTEXTS.get()[depth - 1]
        }
    }
}
