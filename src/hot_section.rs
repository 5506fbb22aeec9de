//! Statics that every intercepted launch reads, kept together in memory.
//!
//! Between two launches a real program runs tens of microseconds of its own code, which
//! evicts the shim's data from the core's first-level cache; the launch path then pays a
//! miss for every cache line it reads, and the flags it checks (timing on, the host-race
//! guard armed, the footprint engine on, the options, the model's place) are each a few
//! bytes in a line of their own, spread over the library's data by the linker: a dozen
//! misses a launch for some twenty bytes (`reports/perf/runs/40-hot-lines/`). A static
//! declared with [`hot!`] goes into one section of its own, `.streamsan.hot`, which the
//! linker lays out whole, its statics side by side. Only statics that are read on every
//! launch and written rarely belong there: one that threads write often would have every
//! other thread's reads of its neighbours miss. And only writable ones (atomics, `OnceLock`s):
//! the section is one, with one set of flags.

/// Declares a static in the [`crate::hot_section`] section: `hot! { static NAME: Type = init; }`,
/// with its doc comment and visibility.
#[macro_export]
macro_rules! hot {
    ($(#[$meta:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr;) => {
        $(#[$meta])*
        #[link_section = ".streamsan.hot"]
        $vis static $name: $ty = $init;
    };
}
