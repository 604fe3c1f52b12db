#!/usr/bin/env bash
# The language server's real clients, OUTSIDE the repo: a venv with pytest-lsp (pygls'
# client, pinned with what it resolved to) at ${KVLINT_LSP_VENV:-$HOME/.cache/kvlint/lsp-venv},
# and Neovim from Debian's packages. Idempotent: a stamp records the pin set.
# Prints one line; `scripts/setup-editors.sh --print-python` prints the venv's python only.
set -euo pipefail

VENV="${KVLINT_LSP_VENV:-$HOME/.cache/kvlint/lsp-venv}"
PYTHON="${PYTHON:-python3}"
REQUIREMENTS="
pytest-lsp==1.0.1
pytest==9.2.0
pytest-timeout==2.4.0
"
CONSTRAINTS="
attrs==26.1.0
cattrs==26.2.1
iniconfig==2.3.1
lsprotocol==2025.0.0
packaging==26.4
pluggy==1.7.0
pygls==2.1.1
Pygments==2.21.0
pytest-asyncio==1.5.0
typing_extensions==4.16.0
"

print_python=0
[[ "${1:-}" == "--print-python" ]] && print_python=1
done_line() {
  if [[ $print_python == 1 ]]; then echo "$VENV/bin/python"; else echo "kvlint editor clients $1: $VENV (pytest-lsp 1.0.1), $(nvim --version | head -1)"; fi
}

command -v nvim >/dev/null || { apt-get update -qq && apt-get install -y -qq neovim >/dev/null; }

STAMP="$VENV/.kvlint-stamp"
want_stamp="$(printf '%s\n%s\n' "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]]; then
  done_line "up to date"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$REQUIREMENTS" >"$tmp/requirements.txt"
printf '%s\n' "$CONSTRAINTS" >"$tmp/constraints.txt"
quiet() {
  if ! "$@" >"$tmp/log" 2>&1; then cat "$tmp/log" >&2; echo "setup-editors: command failed: $*" >&2; exit 1; fi
}
[[ -x "$VENV/bin/python" ]] || { mkdir -p "$(dirname "$VENV")"; quiet "$PYTHON" -m venv "$VENV"; }
rm -f "$STAMP"
quiet "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
  -r "$tmp/requirements.txt" -c "$tmp/constraints.txt"
quiet "$VENV/bin/python" -c 'import pytest_lsp, lsprotocol'
printf '%s' "$want_stamp" >"$STAMP"
done_line "ready"
