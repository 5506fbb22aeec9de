//! The options of this process (`STREAMSAN_OPTIONS`), read once, on first need: at the bottom
//! of the shim, since every layer may have to say something on stderr before the library's
//! constructor ran.

use std::sync::OnceLock;

use streamsan::options::Options;

/// The options of this process.
pub fn options() -> &'static Options {
    streamsan::hot! { static OPTIONS: OnceLock<Options> = OnceLock::new(); }
    OPTIONS.get_or_init(|| Options::from_env().unwrap_or_else(|e| fail(&format!("STREAMSAN_OPTIONS: {e}"))))
}

/// A mistake in what the user asked for: said, and the program stopped before it starts.
/// (Said as [`super::diag::error`] says things; that module reads the options, this one
/// cannot use it.)
pub fn fail(why: &str) -> ! {
    eprintln!("streamsan: {why}");
    std::process::exit(2)
}
