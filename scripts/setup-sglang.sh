#!/usr/bin/env bash
# Set up SGLang's request handling for kvlint's engine-mode parity test, OUTSIDE the repo:
#
#   venv: ${KVLINT_SGLANG_VENV:-$HOME/.cache/kvlint/sglang-venv}   (~330 MB)
#
#   scripts/setup-sglang.sh            # create it (idempotent: a stamp makes reruns no-ops)
#   scripts/setup-sglang.sh --python   # ... then print the venv's python (only that, on stdout)
#
# The parity test runs SGLang's own chat serving code in process (scripts/sglang_render.py):
# its pydantic request model, `OpenAIServingChat._process_messages` and the chat template
# through transformers. No engine is started, so SGLang's GPU requirements are not needed:
# the venv takes torch, transformers, pydantic and the rest from the vLLM venv of
# scripts/setup-vllm.sh (a .pth file), and adds the sglang wheel without its dependencies,
# the few modules its serving code imports that vLLM does not have (orjson, IPython) and the
# torchvision built for that torch.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${KVLINT_SGLANG_VENV:-$HOME/.cache/kvlint/sglang-venv}"
SGLANG_VERSION=0.5.23
TORCHVISION_VERSION=0.28.0 # the one built for the vLLM venv's torch 2.13.0

mode=setup
case "${1:-}" in
  "") ;;
  --python) mode=python ;;
  -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup-sglang: unknown argument: $1 (use --python or nothing)" >&2; exit 2 ;;
esac

die() { echo "setup-sglang: $*" >&2; exit 1; }
log() { echo "setup-sglang: $*" >&2; }

vllm_python="$(scripts/setup-vllm.sh --python)"
vllm_site="$("$vllm_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
stamp="$VENV/.kvlint-sglang-stamp"
want="sglang==$SGLANG_VERSION torchvision==$TORCHVISION_VERSION orjson IPython on $(cat "$(dirname "$vllm_python")/../.kvlint-vllm-stamp" 2>/dev/null) v1"

if [[ -x "$VENV/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  log "sglang venv up to date: $VENV"
else
  t0=$SECONDS
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  quiet() {
    if ! "$@" >"$tmp/log" 2>&1; then tail -n 40 "$tmp/log" >&2; die "command failed: $*"; fi
  }
  rm -rf "$VENV"
  quiet "$vllm_python" -m venv "$VENV"
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$vllm_site" >"$site/kvlint-vllm-venv.pth"
  pip=("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q)
  quiet "${pip[@]}" --no-deps "sglang==$SGLANG_VERSION" "torchvision==$TORCHVISION_VERSION"
  echo "torch==2.13.0" >"$tmp/constraints.txt"
  quiet "${pip[@]}" -c "$tmp/constraints.txt" orjson IPython
  quiet "$VENV/bin/python" -c 'import sglang.srt.entrypoints.openai.serving_chat'
  printf '%s' "$want" >"$stamp"
  log "sglang venv ready in $((SECONDS - t0)) s: $VENV ($(du -sh "$VENV" | cut -f1))"
fi
if [[ "$mode" == python ]]; then echo "$VENV/bin/python"; fi
