#!/usr/bin/env bash
# Set up the real routers the live router tests run in front of llama-server, OUTSIDE the
# repo, one venv each (~1 GB in all; from PyPI on a fresh machine, 3.5 min here):
#
#   ${KVLINT_ROUTERS:-$HOME/.cache/kvlint/routers}/{smg-1.13.0,sglang-router-0.3.2,vllm-router-0.1.17,dynamo-1.6.1}
#
#   scripts/setup-routers.sh                  # create them (idempotent: a stamp makes reruns no-ops)
#   scripts/setup-routers.sh --bin ROUTER     # ... then print ROUTER's command (smg, sglang-router, vllm-router)
#   scripts/setup-routers.sh --python dynamo  # ... then print the Dynamo venv's python
#
# Each router's wheel is pinned by version and sha256 (installed with --require-hashes
# --no-deps), its dependencies by version (the ones pip resolved on 2026-12-02). Wheels come
# from PyPI, or from ${KVLINT_ROUTER_WHEELS:-$HOME/.cache/kvlint/router-wheels} when they are
# there (pip --find-links). NVIDIA Dynamo: `ai-dynamo` 1.6.1 requires aisimulate==0.13.0,
# which PyPI does not serve (only its dev releases), so a plain install fails; its replay
# engine is compiled into ai-dynamo-runtime's `_core` anyway. So: the runtime, then ai-dynamo
# with --no-deps, then its light dependencies (kubernetes, redis and aisimulate left out),
# then `import dynamo.frontend, dynamo.mocker` must work.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT="${KVLINT_ROUTERS:-$HOME/.cache/kvlint/routers}"
WHEELS="${KVLINT_ROUTER_WHEELS:-$HOME/.cache/kvlint/router-wheels}"
PYTHON="${PYTHON:-python3}"

# name==version sha256 of the wheel (manylinux x86_64; abi3 wheels, any CPython >= 3.10).
SMG="smg==1.13.0 cfae8171dac68a74b4822263b1864fa79952992ee472a25ba7266ccd200399b4"
SGLANG_ROUTER="sglang-router==0.3.2 ba5a24951e5e0357fe390782fcd1abd861448a87216832dbf2e501a1dd1548eb"
VLLM_ROUTER="vllm-router==0.1.17 85c96bea4d573a49b5a8ae4c72ee3dfe733aba26b6f1ff1256e6142f1f42694d"
DYNAMO_RUNTIME="ai-dynamo-runtime==1.6.1 3683cafe88ededdff29c9ae6f651367eac33153487ff84e205082483cd6b3095"
DYNAMO="ai-dynamo==1.6.1 83f768730104cbbc84029bf436025706632735173933adbb650b99c746517b70"

# Their Requires-Dist, resolved and pinned.
WEB_DEPS="setproctitle==1.3.8 aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0
  frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 idna==3.20 orjson==3.13.0
  uvicorn==0.54.0 click==8.5.1 h11==0.16.0 fastapi==0.165.0 starlette==1.10.0 anyio==4.16.0
  annotated-doc==0.0.7 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
  typing-inspection==0.4.5 typing_extensions==4.16.0 opentelemetry-api==1.45.2"
SMG_DEPS="setproctitle==1.3.8 grpcio==1.85.3 grpcio-health-checking==1.85.1 protobuf==7.36.2
  PyYAML==6.0.4 typing_extensions==4.16.0"
SGLANG_ROUTER_DEPS="$WEB_DEPS"
VLLM_ROUTER_DEPS="$WEB_DEPS requests==2.34.2 certifi==2026.10.19.post1 charset-normalizer==3.5.3
  urllib3==2.8.0"
DYNAMO_DEPS="aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7
  annotated-types==0.8.0 anyio==4.16.0 attrs==26.1.0 certifi==2026.10.19.post1 click==8.5.1
  filelock==4.3.1 frozenlist==1.8.0 fsspec==2026.9.0 h11==0.16.0 hf-xet==1.8.0
  httpcore2==2.16.2 httpx2==2.16.2 huggingface_hub==2.4.0 idna==3.20 markdown-it-py==4.3.0
  mdurl==0.1.2 msgspec==0.23.0 multidict==7.2.1 numpy==2.4.6 packaging==26.4
  prometheus_client==0.26.0 propcache==0.5.4 pydantic==2.13.5 pydantic_core==2.46.5
  Pygments==2.21.0 PyYAML==6.0.4 pyzmq==27.3.0 regex==2026.11.19 rich==15.0.0
  safetensors==0.8.0 shellingham==1.5.4 tokenizers==0.23.3 tqdm==4.70.1 transformers==5.24.0
  truststore==0.10.5 typer==0.29.2 typing-inspection==0.4.5 typing_extensions==4.16.0
  uvloop==0.23.0 yarl==1.25.1 zstandard==0.25.0"

mode=setup
case "${1:-}" in
  "") ;;
  --bin) mode=bin; which="${2:?--bin needs smg, sglang-router or vllm-router}" ;;
  --python) mode=python; which="${2:?--python needs dynamo}" ;;
  -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup-routers: unknown argument: $1 (use --bin ROUTER, --python dynamo or nothing)" >&2; exit 2 ;;
esac

die() { echo "setup-routers: $*" >&2; exit 1; }
log() { echo "setup-routers: $*" >&2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
quiet() {
  if ! "$@" >"$tmp/log" 2>&1; then tail -n 40 "$tmp/log" >&2; die "command failed: $*"; fi
}
find_links=()
[[ -d "$WHEELS" ]] && find_links=(--find-links "$WHEELS")

# venv NAME "WHEELS (name==version sha256, ...)" "DEPS" CHECK: the venv ROOT/NAME with the
# pinned wheels and dependencies, unless its stamp already says so.
venv() {
  local name="$1" pinned="$2" deps="$3" check="$4"
  local dir="$ROOT/$name" want
  want="$(echo "$pinned $deps v1" | tr -s ' \n' ' ')"
  if [[ -x "$dir/bin/python" && -f "$dir/.kvlint-stamp" && "$(cat "$dir/.kvlint-stamp")" == "$want" ]]; then
    return
  fi
  local t0=$SECONDS
  rm -rf "$dir"
  mkdir -p "$ROOT"
  quiet "$PYTHON" -m venv "$dir"
  local pip=("$dir/bin/python" -m pip install --disable-pip-version-check --no-input -q "${find_links[@]}")
  # shellcheck disable=SC2086 # the lists are words
  quiet "${pip[@]}" --no-deps $deps
  echo "$pinned" | awk '{ for (i = 1; i < NF; i += 2) print $i " --hash=sha256:" $(i + 1) }' >"$tmp/pinned.txt"
  quiet "${pip[@]}" --no-deps --require-hashes -r "$tmp/pinned.txt"
  quiet "$dir/bin/python" -c "$check"
  printf '%s' "$want" >"$dir/.kvlint-stamp"
  log "$name ready in $((SECONDS - t0)) s: $dir ($(du -sh "$dir" | cut -f1))"
}

venv smg-1.13.0 "$SMG" "$SMG_DEPS" "import smg"
venv sglang-router-0.3.2 "$SGLANG_ROUTER" "$SGLANG_ROUTER_DEPS" "import sglang_router"
venv vllm-router-0.1.17 "$VLLM_ROUTER" "$VLLM_ROUTER_DEPS" "import vllm_router"
venv dynamo-1.6.1 "$DYNAMO_RUNTIME $DYNAMO" "$DYNAMO_DEPS" "import dynamo.frontend, dynamo.mocker"

case "$mode" in
  bin)
    case "$which" in
      smg) echo "$ROOT/smg-1.13.0/bin/smg" ;;
      sglang-router) echo "$ROOT/sglang-router-0.3.2/bin/sglang-router" ;;
      vllm-router) echo "$ROOT/vllm-router-0.1.17/bin/vllm-router" ;;
      *) die "--bin: unknown router $which (smg, sglang-router or vllm-router)" ;;
    esac ;;
  python)
    [[ "$which" == dynamo ]] || die "--python: unknown venv $which (dynamo)"
    echo "$ROOT/dynamo-1.6.1/bin/python" ;;
  *) ;;
esac
