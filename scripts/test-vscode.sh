#!/usr/bin/env bash
# The VS Code extension (editors/vscode): installs its locked dependencies, lints, runs its unit
# tests under Node (no VS Code), packages it, and prints the path of the .vsix built.
set -euo pipefail
cd "$(dirname "$0")/.."

cd editors/vscode
npm ci --no-audit --no-fund
npm run lint
npm test
npm run package
version="$(node -p "require('./package.json').version")"
vsix="$PWD/kvlint-$version.vsix"
[[ -f "$vsix" ]] || { echo "no $vsix was built" >&2; exit 1; }
echo "$vsix"
