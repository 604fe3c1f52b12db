#!/usr/bin/env bash
# Create the Python venv the Python SDK (`kvlint-cache`, sources in python/) is built and
# tested in, OUTSIDE the repo:
#
#   ${KVLINT_SDK_VENV:-$HOME/.cache/kvlint/py-sdk-venv}
#
# It holds maturin (builds the native module `kvlint_cache._kvlint`), pytest, and the clients
# the integrations wrap and their tests drive against a real llama-server: openai, anthropic,
# httpx and httpx2 (openai >= 3 and anthropic >= 2 are built on httpx2, not httpx), langgraph,
# langchain-openai, langchain-core and openai-agents; and ruff and mypy (with its stubtest),
# which check kvlint_cache and its native module's stub. The package itself is not installed
# here: build it into this venv with `maturin develop` (see python/README or scripts/test.sh).
#
# Pinned: the top-level packages, plus the full resolved dependency set (pip freeze), so
# reruns on a fresh machine give the same clients.
# Idempotent: a stamp in the venv records the pin set; a second run is a no-op.
# Quiet: prints one summary line on success; on failure prints pip's output.
# Prints nothing else, so `SDK_PY=$(scripts/setup-python-sdk.sh --print-python)` also works.
set -euo pipefail

VENV="${KVLINT_SDK_VENV:-$HOME/.cache/kvlint/py-sdk-venv}"
PYTHON="${PYTHON:-python3}"

# Top-level pins (what we care about) ...
REQUIREMENTS="
maturin==1.16.0
pytest==9.2.0
openai==3.57.0
anthropic==2.14.0
httpx==0.28.1
httpx2==2.16.2
langgraph==1.2.24
langchain-openai==1.7.4
langchain-core==1.8.3
openai-agents==0.24.0
ruff==0.17.6
mypy==2.4.1
"
# ... and the rest of the set pip resolved for them (Python 3.11, linux x86_64).
CONSTRAINTS="
annotated-types==0.8.0
anyio==4.16.0
ast_serialize==0.13.1
attrs==26.1.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
distro==1.9.0
docstring_parser==0.18.0
griffelib==2.4.1
h11==0.16.0
httpcore==1.0.9
httpcore2==2.16.2
idna==3.20
iniconfig==2.3.1
jiter==0.19.0
jsonpatch==1.48
jsonpointer==3.12
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
langchain-protocol==0.0.20
langgraph-checkpoint==4.3.2
langgraph-prebuilt==1.1.3
langgraph-sdk==0.4.14
langsmith==0.15.1
librt==0.17.0
mcp==2.3.0
mcp-types==2.3.0
mypy_extensions==1.2.0
opentelemetry-api==1.45.2
orjson==3.13.0
ormsgpack==1.13.1
packaging==26.4
pathspec==1.1.1
pluggy==1.7.0
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
PyJWT==2.15.1
python-multipart==0.0.34
PyYAML==6.0.4
referencing==0.37.0
regex==2026.11.19
requests==2.34.2
requests-toolbelt==1.0.0
rpds-py==2026.9.1
sniffio==1.3.1
sse-starlette==3.7.0
starlette==1.10.0
tenacity==9.2.1
tiktoken==0.14.0
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0
uuid_utils==0.19.0
uvicorn==0.54.0
websockets==16.1.1
xxhash==4.1.0
zstandard==0.25.0
"

print_python=0
[[ "${1:-}" == "--print-python" ]] && print_python=1

die() { echo "setup-python-sdk: $*" >&2; exit 1; }

STAMP="$VENV/.kvlint-stamp"
want_stamp="$(printf '%s\n%s\n' "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"

done_line() {
  if [[ $print_python == 1 ]]; then echo "$VENV/bin/python"; else echo "kvlint Python SDK venv $1: $VENV (maturin 1.16.0, pytest 9.2.0, openai 3.57.0, anthropic 2.14.0, langgraph 1.2.24, openai-agents 0.24.0, ruff 0.17.6, mypy 2.4.1)"; fi
}

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]]; then
  done_line "up to date"
  exit 0
fi

command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "httpx2 (under openai 3 and anthropic 2) needs Python >= 3.11 ($("$PYTHON" --version 2>&1))"

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
quiet "$VENV/bin/python" -c 'import maturin, pytest, openai, anthropic, httpx, httpx2, langgraph.prebuilt, langchain_openai, langchain_core.messages, agents, mypy.stubtest'
quiet "$VENV/bin/ruff" --version
printf '%s' "$want_stamp" >"$STAMP"
done_line "ready"
