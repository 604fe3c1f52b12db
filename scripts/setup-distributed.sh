#!/usr/bin/env bash
# Create the venv the distributed recipes of `kvlint_cache.workload` are tested in, OUTSIDE
# the repo:
#
#   ${KVLINT_DIST_VENV:-$HOME/.cache/kvlint/dist-venv}
#
# It holds Ray (with Ray Data), PySpark (which runs on the machine's JDK 17), DuckDB, pyarrow,
# pandas and pytest; scripts/test.sh installs the kvlint-cache wheel into it and runs
# python/tests-distributed. Kept apart from the SDK venv so that neither set of pins bends the
# other's.
#
# Pinned: the top-level packages, plus the full resolved dependency set (pip freeze); pandas 2,
# since PySpark 4.3 says it does not yet fully support pandas 3.
# Idempotent: a stamp in the venv records the pin set; a second run is a no-op.
# Quiet: prints one summary line on success (or, with --print-python, the venv's python).
set -euo pipefail

VENV="${KVLINT_DIST_VENV:-$HOME/.cache/kvlint/dist-venv}"
PYTHON="${PYTHON:-python3}"

REQUIREMENTS="
ray[data]==2.60.0
pyspark==4.3.0
duckdb==2.0.1
pyarrow==26.0.1
pandas==2.3.3
pytest==9.2.0
"
CONSTRAINTS="
attrs==26.1.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
filelock==4.3.1
fsspec==2026.9.0
idna==3.20
iniconfig==2.3.1
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
msgpack==1.2.4
numpy==2.4.6
packaging==26.4
pluggy==1.7.0
protobuf==7.36.2
py4j==0.10.9.9
Pygments==2.21.0
python-dateutil==4.0.0
pytz==2026.6
PyYAML==6.0.4
referencing==0.37.0
requests==2.34.2
rpds-py==2026.9.1
typing_extensions==4.16.0
tzdata==2026.6
urllib3==2.8.0
"

print_python=0
[[ "${1:-}" == "--print-python" ]] && print_python=1

die() { echo "setup-distributed: $*" >&2; exit 1; }

STAMP="$VENV/.kvlint-stamp"
want_stamp="$(printf '%s\n%s\n' "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"

done_line() {
  if [[ $print_python == 1 ]]; then echo "$VENV/bin/python"; else echo "kvlint distributed venv $1: $VENV (ray 2.60.0, pyspark 4.3.0, duckdb 2.0.1, pyarrow 26.0.1)"; fi
}

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]]; then
  done_line "up to date"
  exit 0
fi

command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
command -v java >/dev/null || die "PySpark needs a JDK 17 on PATH (Debian: apt-get install openjdk-17-jdk-headless)"

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
quiet "$VENV/bin/python" -c 'import ray.data, pyspark.sql, duckdb, pyarrow, pandas, pytest'
printf '%s' "$want_stamp" >"$STAMP"
done_line "ready"
