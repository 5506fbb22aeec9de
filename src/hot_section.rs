//! The `hot!` macro: statics that every intercepted launch reads, kept side by side in one
//! linker section so that the launch path's flags share a few cache lines.

/// Declares a static in the `.streamsan.hot` section: `hot! { static NAME: Type = init; }`,
/// with its doc comment and visibility. Only for statics read on every launch and written
/// rarely (a static written often would make its neighbours' reads miss), and writable
/// ones only (atomics, `OnceLock`s): the section has one set of flags.
#[macro_export]
macro_rules! hot {
    ($(#[$meta:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr;) => {
        $(#[$meta])*
        #[link_section = ".streamsan.hot"]
        $vis static $name: $ty = $init;
    };
}
