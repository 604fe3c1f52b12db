#!/usr/bin/env bash
# The npm package kvlint-cache (node/): its locked build tools (`npm ci`: napi-rs's command
# line, TypeScript, Node's types), the native module built from the kvlint-node crate by
# `napi build` (into node/native/, with its loader and the types napi-rs generates from the
# binding), the TypeScript layer compiled by tsc (node/dist/), then the package's tests under
# Node's own test runner, from its ES module and CommonJS entry points. The package's public
# API, the declarations tsc writes, must equal the committed node/public-api.d.ts: a change
# needs its CHANGELOG.md line and the snapshot updated (`scripts/test-node.sh --bless` writes it).
set -euo pipefail
cd "$(dirname "$0")/../node"

npm ci --no-audit --no-fund --loglevel=error
npx napi build --platform --output-dir native --js native.cjs --dts native.d.cts
npx tsc -p tsconfig.json
if [[ "${1:-}" == --bless ]]; then
  cp dist/index.d.ts public-api.d.ts
elif ! diff -u public-api.d.ts dist/index.d.ts; then
  echo "test-node.sh: the package's API changed (above): add its CHANGELOG.md line, then scripts/test-node.sh --bless" >&2
  exit 1
fi
node --test --test-reporter=tap test/
