// The engine in Cloudflare Workers (the `workerd` condition, which wrangler's bundler sets): the
// WebAssembly module imported as the Workers runtime compiles it at deploy, then the bindings
// wasm-bindgen generated for it (kvlint.mjs). Node takes kvlint.js, which reads the same module.
import module from "./kvlint_bg.wasm";
import { initSync } from "./kvlint.mjs";

initSync({ module });

export * from "./kvlint.mjs";
