#!/usr/bin/env bash
# kvlint-sdk's public API against the committed snapshot sdk/public-api.txt: every item a user
# can name from the crate root, with its signature, read from rustdoc's JSON output
# (scripts/public_api.py). Fails when the API differs from the snapshot: an item removed or
# changed is a break and needs a new kvlint-sdk version that semver allows to break and a
# CHANGELOG.md section naming it; an addition needs only its CHANGELOG line and the snapshot
# updated (`scripts/semver-check.sh --bless` writes it, and refuses an unrecorded break).
#
# Why not cargo-semver-checks: it supports this toolchain's rustdoc JSON, but installing it
# compiles 416 crates, and each run documents the SDK twice (baseline and current, 124 crates
# each) in a target dir of its own; this snapshot documents the SDK in the shared target dir,
# whose dependencies clippy has mostly checked already. sdk/tests/api_compat.rs, a program
# written against the API, must still compile: it covers what the snapshot names only by name
# (the renderer and findings types kvlint-sdk re-exports from kvlint's other crates).
set -euo pipefail
cd "$(dirname "$0")/.."

bless=()
[[ "${1:-}" == --bless ]] && bless=(--bless)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP=1 goes to rustdoc alone, through this
# wrapper. Set for all of cargo, build scripts that read it (proc-macro2's) would run again and
# rebuild their dependents in the shared target dir, and again at the next ordinary build.
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec rustdoc "$@"\n' >"$work/rustdoc"
chmod +x "$work/rustdoc"
api() {
  # --cap-lints: the docs' own warnings (links to items behind the guard feature) are not this
  # check's.
  RUSTDOC="$work/rustdoc" cargo rustdoc -p kvlint-sdk --lib --locked --quiet "$@" -- \
    -Z unstable-options --output-format json --cap-lints allow
  python3 scripts/public_api.py list "$target_dir/doc/kvlint_sdk.json"
}

read -r target_dir version < <(cargo metadata --format-version 1 --no-deps --locked | python3 -c '
import json, sys
metadata = json.load(sys.stdin)
sdk = next(p for p in metadata["packages"] if p["name"] == "kvlint-sdk")
print(metadata["target_directory"], sdk["version"])')

# With the default features, and without them (`default-features = false`, where an item
# moved behind the guard feature is gone).
api >"$work/api.txt"
api --no-default-features | sed 's/^/without default features: /' >>"$work/api.txt"
python3 scripts/public_api.py check sdk/public-api.txt "$work/api.txt" "$version" CHANGELOG.md "${bless[@]}"
