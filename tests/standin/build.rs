// The stand-in is found by programs under the driver's own name: give it the soname
// `libcuda.so.1`, so that a program linked against it with `-lcuda` records that name.
// `-Bsymbolic-functions`: its own references to its functions (the addresses that its
// cuGetProcAddress hands out) bind to its own definitions, as the real driver's do, not to
// a preloaded library's functions of the same name.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
}
