//! Native call stacks of a chosen depth and shape, as a framework's launches come from.

/// Calls `f` from `depth` frames further down the stack.
#[inline(never)]
pub fn at_depth(depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else {
        at_depth(depth - 1, f);
    }
    // Keeps the recursion a real call, not a loop.
    core::hint::black_box(depth);
}

/// Calls `f` from `depth` frames further down the stack, along one of `2^depth` chains: at
/// each level the call comes from one of two functions, as the next bit of `path` says. A
/// framework's launches come from hundreds of different native chains (one per operator),
/// where [`at_depth`]'s are all the same.
#[inline(never)]
pub fn along(path: u32, depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else if path & 1 == 0 {
        along_left(path >> 1, depth - 1, f);
    } else {
        along_right(path >> 1, depth - 1, f);
    }
    core::hint::black_box(depth);
}

#[inline(never)]
fn along_left(path: u32, depth: usize, f: &mut dyn FnMut()) {
    along(path, depth, f);
    core::hint::black_box(path);
}

#[inline(never)]
fn along_right(path: u32, depth: usize, f: &mut dyn FnMut()) {
    along(path, depth, f);
    core::hint::black_box(depth);
}
