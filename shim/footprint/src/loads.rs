//! What a module the driver reports loading on this thread is: the program's (its code is
//! kept for a twin), a twin (patched as it loads) or the engine's copier (left alone). The
//! engine says so around its own loads.

/// What is loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Program,
    Twin,
    Copier,
}

thread_local! {
    static LOADING: std::cell::Cell<Load> = const { std::cell::Cell::new(Load::Program) };
}

/// Runs `load` (a load of the engine's own) with the load callback told what it loads.
pub fn during<T>(what: Load, load: impl FnOnce() -> T) -> T {
    let _ = LOADING.try_with(|l| l.set(what));
    let result = load();
    let _ = LOADING.try_with(|l| l.set(Load::Program));
    result
}

/// What the module the driver reports loading on this thread is.
pub fn current() -> Load {
    LOADING.try_with(std::cell::Cell::get).unwrap_or(Load::Program)
}
