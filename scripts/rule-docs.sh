#!/usr/bin/env bash
# Writes docs/rules/NAME.md, each rule's documentation as `kvlint rule NAME` prints it: the
# pages the language server's diagnostics link to. `cargo test` fails when they are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
kvlint="${KVLINT:-target/debug/kvlint}"
mkdir -p docs/rules
rm -f docs/rules/*.md
"$kvlint" rule | while read -r _code name _; do
  "$kvlint" rule "$name" > "docs/rules/$name.md"
done
