#!/usr/bin/env bash
# Create the Python venv used by scripts/reference_render.py (reference chat-template
# renderings made with the real HuggingFace `transformers`), scripts/recording_bodies.py
# (recordings read with PyYAML and msgpack) and scripts/otel_traces.py (OpenTelemetry traces of
# the real `openai` client, instrumented by opentelemetry-instrumentation-openai-v2 and
# openinference-instrumentation-openai), OUTSIDE the repo:
#
#   ${KVLINT_VENV:-$HOME/.cache/kvlint/venv}
#
# Pinned: transformers / tokenizers / jinja2, plus the full resolved dependency set so
# reruns on a fresh machine give the same renderer. No torch (transformers only warns).
# Idempotent: a stamp in the venv records the pin set; a second run is a no-op.
# Quiet: prints one summary line on success; on failure prints pip's output.
# Prints nothing else, so `VENV_PY=$(scripts/setup-python.sh --print-python)` also works.
set -euo pipefail

VENV="${KVLINT_VENV:-$HOME/.cache/kvlint/venv}"
PYTHON="${PYTHON:-python3}"

# Top-level pins (what we care about) ...
REQUIREMENTS="
transformers==5.24.0
tokenizers==0.23.3
jinja2==3.1.6
gguf==0.19.0
msgpack==1.2.4
openai==3.57.0
httpx==0.28.1
opentelemetry-sdk==1.45.2
opentelemetry-instrumentation-openai-v2==2.4b0
openinference-instrumentation-openai==0.1.66
opentelemetry-exporter-otlp-proto-common==1.45.2
protobuf==7.36.2
# openai-v2 2.4b0 imports opentelemetry.util.genai.instruments, which 1.2b0 renamed (pip picks 1.3b0)
opentelemetry-util-genai==1.1b0
"
# ... and the rest of the set pip resolved for them (Python 3.11, linux x86_64).
CONSTRAINTS="
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
filelock==4.3.1
fsspec==2026.9.0
h11==0.16.0
hf-xet==1.8.0
httpcore==1.0.9
httpcore2==2.16.2
httpx2==2.16.2
huggingface_hub==2.4.0
idna==3.20
jiter==0.19.0
MarkupSafe==3.0.4
markdown-it-py==4.3.0
mdurl==0.1.2
numpy==2.4.6
openinference-instrumentation==0.1.72
openinference-semantic-conventions==0.1.42
opentelemetry-api==1.45.2
opentelemetry-instrumentation==0.66b2
opentelemetry-proto==1.45.2
opentelemetry-semantic-conventions==0.66b2
packaging==26.4
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
PyYAML==6.0.4
regex==2026.11.19
requests==2.34.2
rich==15.0.0
safetensors==0.8.0
shellingham==1.5.4
sniffio==1.3.1
tqdm==4.70.1
truststore==0.10.5
typer==0.29.2
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0
wrapt==2.5.2
"

print_python=0
[[ "${1:-}" == "--print-python" ]] && print_python=1

die() { echo "setup-python: $*" >&2; exit 1; }

STAMP="$VENV/.kvlint-stamp"
want_stamp="$(printf '%s\n%s\n' "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"

done_line() {
  if [[ $print_python == 1 ]]; then echo "$VENV/bin/python"; else echo "kvlint venv $1: $VENV (transformers 5.24.0, tokenizers 0.23.3, jinja2 3.1.6, openai 3.57.0, opentelemetry-sdk 1.45.2)"; fi
}

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]]; then
  done_line "up to date"
  exit 0
fi

command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "transformers 5 needs Python >= 3.10 ($("$PYTHON" --version 2>&1))"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$REQUIREMENTS" >"$tmp/requirements.txt"
printf '%s\n' "$CONSTRAINTS" >"$tmp/constraints.txt"

quiet() {
  if ! "$@" >"$tmp/log" 2>&1; then cat "$tmp/log" >&2; die "command failed: $*"; fi
}

if [[ ! -x "$VENV/bin/python" ]]; then
  mkdir -p "$(dirname "$VENV")"
  quiet "$PYTHON" -m venv "$VENV"
fi
rm -f "$STAMP"
quiet "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
  -r "$tmp/requirements.txt" -c "$tmp/constraints.txt"
quiet "$VENV/bin/python" -c 'import transformers, tokenizers, jinja2, openai, opentelemetry.sdk.trace, opentelemetry.instrumentation.openai_v2, openinference.instrumentation.openai, opentelemetry.exporter.otlp.proto.common.trace_encoder'
printf '%s' "$want_stamp" >"$STAMP"
done_line "ready"
