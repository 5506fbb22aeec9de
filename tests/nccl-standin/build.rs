// Programs find the stand-in under NCCL's own name: give it the soname `libnccl.so.2`, so
// that a program linked against it with `-lnccl` records that name.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
}
