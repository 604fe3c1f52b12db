#!/usr/bin/env bash
# A venv with pre-commit (PyPI), OUTSIDE the repo, for the test that runs kvlint's hooks:
#   ${KVLINT_PRE_COMMIT_VENV:-$HOME/.cache/kvlint/pre-commit-venv}
# Idempotent: a second run is a no-op.
set -euo pipefail
VENV="${KVLINT_PRE_COMMIT_VENV:-$HOME/.cache/kvlint/pre-commit-venv}"
VERSION="4.7.0"
if [[ -x "$VENV/bin/pre-commit" && "$("$VENV/bin/pre-commit" --version)" == "pre-commit $VERSION" ]]; then
  echo "kvlint pre-commit venv up to date: $VENV (pre-commit $VERSION)"
  exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { "${PYTHON:-python3}" -m venv "$VENV" && "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input "pre-commit==$VERSION"; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
echo "kvlint pre-commit venv ready: $VENV (pre-commit $VERSION)"
