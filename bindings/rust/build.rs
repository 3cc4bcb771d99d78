// Links libgexec_c. GEXEC_C_LIB_DIR names the directory that holds libgexec_c.so; it is
// added to the search path and, for the crate's own tests and examples, to their rpath.
// Without it the library is looked for on the system's default paths.
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=GEXEC_C_LIB_DIR");
    if let Ok(dir) = env::var("GEXEC_C_LIB_DIR") {
        if !dir.is_empty() {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    println!("cargo:rustc-link-lib=dylib=gexec_c");
}
