#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: fetches the real tokenizers and chat
# templates the tests use (into ~/.cache/kvlint, outside the repo), sets up the
# transformers venv the rendering tests compare against, runs every test, then the
# long-session benchmark (which fails when kvlint is under 20x faster than re-tokenizing).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-assets.sh
scripts/setup-python.sh
scripts/setup-pre-commit.sh

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"
cargo bench -p kvlint-core --bench long_session --locked
cargo bench -p kvlint --bench templates --locked

# One closing line for the whole suite.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
