#!/usr/bin/env bash
# Entry point of the pre-commit hooks: builds kvlint once (release) in the hook's checkout,
# then runs it on the files pre-commit passes. CARGO_TARGET_DIR, when set, is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$here/target}"
binary="$target/release/kvlint"
if [[ ! -x "$binary" || "$here/Cargo.lock" -nt "$binary" ]]; then
  cargo build --release --quiet --locked -p kvlint --manifest-path "$here/Cargo.toml" >&2
fi
exec "$binary" "$@"
