#!/usr/bin/env bash
# The editor integration: `kvlint lsp` driven by real clients (pytest-lsp with VS Code's and
# Neovim's capabilities; Neovim itself, headless), then the VS Code extension (lint, unit tests,
# .vsix). Uses the kvlint binary `cargo test` built, or $KVLINT.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-editors.sh
python="$(scripts/setup-editors.sh --print-python)"
export KVLINT="${KVLINT:-$PWD/target/debug/kvlint}"
[[ -x "$KVLINT" ]] || cargo build --locked -p kvlint --bin kvlint
(cd editors/tests && "$python" -m pytest -q -p no:cacheprovider)
scripts/test-vscode.sh
