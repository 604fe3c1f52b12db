//! napi-rs's link settings for a native build; `cfg(wasm)` for a WebAssembly one, where the
//! bindings are wasm-bindgen's.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(wasm)");
    if std::env::var("CARGO_CFG_TARGET_FAMILY")
        .is_ok_and(|family| family.split(',').any(|family| family == "wasm"))
    {
        println!("cargo::rustc-cfg=wasm");
    } else {
        napi_build::setup();
    }
}
