//! One-line diagnostics of streamsan itself (not race reports), on stderr.

/// Writes `streamsan: <message>` to stderr. Diagnostics never stop the program.
pub fn warn(message: &str) {
    eprintln!("streamsan: {message}");
}
