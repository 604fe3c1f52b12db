#!/usr/bin/env bash
# The npm package as a user installs it: `npm pack` of the platform package
# (kvlint-cache-linux-x64-gnu, napi-rs's per-platform layout in node/npm/, with the native module
# scripts/test-node.sh built), of the WebAssembly one (kvlint-cache-wasm32) and of the main
# package with the platform package among its optional dependencies (as `napi prepublish`
# writes them), installed from the three tarballs into a new project; a TypeScript file there is
# type-checked against the installed types, compiled and run as an ES module and as CommonJS, on
# Node, Bun and Deno, and on Node with the WebAssembly engine.
set -euo pipefail
cd "$(dirname "$0")/../node"

work="$(mktemp -d)"
trap '[[ -n "${KVLINT_KEEP:-}" ]] || rm -rf "$work"' EXIT
version="$(node -p 'require("./package.json").version')"
platform="$(node -p 'require("./npm/linux-x64-gnu/package.json").name')"

cp -r npm/linux-x64-gnu "$work/platform"
cp native/kvlint-cache.linux-x64-gnu.node "$work/platform/"
(cd "$work/platform" && npm pack --silent --pack-destination "$work" >/dev/null)
(cd npm/wasm32 && npm pack --silent --pack-destination "$work" >/dev/null)

mkdir "$work/main"
cp package.json README.md index.mjs "$work/main/"
cp -r dist "$work/main/dist"
mkdir "$work/main/native"
cp native/native.cjs native/native.d.cts "$work/main/native/"
(cd "$work/main" && npm pkg delete devDependencies scripts \
  && npm pkg set "optionalDependencies.$platform=$version" \
  && npm pack --silent --pack-destination "$work" >/dev/null)

mkdir "$work/project"
cd "$work/project"
npm init -y >/dev/null
npm install --no-audit --no-fund --loglevel=error \
  "$work/kvlint-cache-$version.tgz" "$work/$platform-$version.tgz" "$work/kvlint-cache-wasm32-$version.tgz"
# The main package carries no native module of its own: the platform package's is the one loaded.
if tar tzf "$work/kvlint-cache-$version.tgz" | grep -q '\.node$'; then
  echo "test-package.sh: the main package's tarball carries a .node file" >&2
  exit 1
fi
tsc="$OLDPWD/node_modules/.bin/tsc"
cp "$OLDPWD/test-package/consumer.ts" consumer.ts
cp consumer.ts consumer.mts
"$tsc" --strict --target es2022 --module node16 --moduleResolution node16 --types node \
  --typeRoots "$OLDPWD/node_modules/@types" consumer.ts consumer.mts
# On Node, and on Bun and Deno through their Node-API support (both from the npm registry, in
# node/'s locked tools).
bin="$OLDPWD/node_modules/.bin"
expected='{"applied":true,"findings":0,"reused":'
passed=0
for run in "node consumer.js" "node consumer.mjs" "$bin/bun consumer.js" "$bin/bun consumer.mjs" \
  "$bin/deno run --allow-read --allow-env --allow-ffi consumer.mjs" \
  "node --conditions=kvlint-wasm consumer.js" "node --conditions=kvlint-wasm consumer.mjs"; do
  printed="$($run)"
  echo "${run##*/}: $printed"
  [[ "$printed" == "$expected"* ]] || { echo "test-package.sh: $run printed $printed" >&2; exit 1; }
  passed=$((passed + 1))
done
# Under that condition the engine is the WebAssembly package's, not the native one beside it.
node --conditions=kvlint-wasm -e 'require("kvlint-cache");
const loaded = Object.keys(require.cache);
if (!loaded.some((file) => file.endsWith("kvlint-cache-wasm32/kvlint.js")) || loaded.some((file) => file.endsWith(".node"))) {
  console.error(`test-package.sh: --conditions=kvlint-wasm loaded ${loaded.join(", ")}`);
  process.exit(1);
}'
passed=$((passed + 1))
[[ -z "${KVLINT_KEEP:-}" ]] || echo "test-package.sh: the project is kept in $work/project"
echo "# pass $passed"
