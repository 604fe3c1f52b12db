#!/usr/bin/env bash
# The guard's cost on a request in Node (node/bench/observe.mjs): Guard.observe on a growing
# 200-turn conversation, p50 and p99 per call at 10k, 50k and 100k prompt tokens, its JSON
# hand-over and the Node-API crossing measured apart; fails when the p99 at 50k tokens is 2 ms
# or more. On a release build of the native module, written over the debug one the tests used
# (after scripts/test-node.sh, which installs Node 22 and the package's build tools).
set -euo pipefail
scripts="$(cd "$(dirname "$0")" && pwd)"
cd "$scripts/../node"
node22="${KVLINT_CACHE:-$HOME/.cache/kvlint}/node-22.23.5/bin/node"
if [[ ! -x "$node22" ]]; then
  echo "bench-node.sh: $node22 is missing: run scripts/test-node.sh first (it installs Node 22)" >&2
  exit 2
fi
npx napi build --platform --release --output-dir native --js native.cjs --dts native.d.cts
npx tsc -p tsconfig.json
"$node22" bench/observe.mjs
