#!/usr/bin/env bash
# kvlint-cache-wasm32 (node/npm/wasm32/): the kvlint-node crate compiled to
# wasm32-unknown-unknown (release: a debug build is several times larger and slower), then
# wasm-bindgen's bindings for it, twice over the same module: kvlint.js for Node (CommonJS, reads
# kvlint_bg.wasm beside it) and kvlint.mjs for the Workers runtime (an ES module, handed the
# module workerd.mjs imports). The target comes from rustup; wasm-bindgen's command line is built
# once into ~/.cache/kvlint at the version Cargo.lock pins for the crate (the two must match).
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown >/dev/null
version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)"
tools="${KVLINT_CACHE:-$HOME/.cache/kvlint}/wasm-bindgen-$version"
if [[ ! -x "$tools/bin/wasm-bindgen" ]]; then
  # Not --locked: its lock file pins a webpki-roots release the registry no longer serves.
  cargo install --quiet wasm-bindgen-cli --version "=$version" --root "$tools"
fi
cargo build --quiet -p kvlint-node --target wasm32-unknown-unknown --release --locked
module="${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/kvlint_node.wasm"
out=node/npm/wasm32
"$tools/bin/wasm-bindgen" --target nodejs --no-typescript --out-name kvlint --out-dir "$out" "$module"
web="$(mktemp -d)"
trap 'rm -rf "$web"' EXIT
"$tools/bin/wasm-bindgen" --target web --no-typescript --out-name kvlint --out-dir "$web" "$module"
cmp -s "$web/kvlint_bg.wasm" "$out/kvlint_bg.wasm" || {
  echo "build-wasm.sh: wasm-bindgen wrote a different module for the web target" >&2
  exit 1
}
cp "$web/kvlint.js" "$out/kvlint.mjs"
