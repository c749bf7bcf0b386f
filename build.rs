//! Links the `spex` executable as non-PIE: `spex dispatch` runs on every tool call, and a
//! position-independent executable makes the loader apply ~14,000 relocations (touching ~70
//! pages) before `main`; a fixed-address executable starts with none. `.cargo/config.toml`
//! already links the binary statically at a fixed address on linux-gnu; this keeps a build that
//! does not read that file (another working folder, `--config` overrides) at a fixed address.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
