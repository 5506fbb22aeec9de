//! One-line diagnostics of streamsan itself (not race reports), on stderr.

use super::options::options;

/// Something the user should know that does not stop the program: `streamsan: <message>`,
/// unless the options say `quiet`.
pub fn warn(message: &str) {
    if !options().quiet {
        eprintln!("streamsan: {message}");
    }
}

/// A problem the user must hear of, quiet or not.
pub fn error(message: &str) {
    eprintln!("streamsan: {message}");
}
