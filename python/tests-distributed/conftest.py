"""The generated log (make_log.py), as session files and as a request log in Parquet, files no
run can trace, and the `kvlint` command the distributed runs are held to."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from make_log import write_log, write_parquet_log


@pytest.fixture(scope="session")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated log: 48 sessions under ``log/``."""
    root = tmp_path_factory.mktemp("workload") / "log"
    write_log(root, 48)
    return root


@pytest.fixture(scope="session")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files no run can trace: invalid JSON, a truncated gzip stream, not a request at all."""
    root = tmp_path_factory.mktemp("bad")
    (root / "invalid.jsonl").write_text('{"model": "gpt-4o", "messages": [\n')
    (root / "truncated.jsonl.gz").write_bytes(gzip.compress(b'{"model": "x"}\n' * 50)[:40])
    (root / "not-a-request.jsonl").write_text('{"hello": "world"}\n')
    return root


def kvlint_command() -> str:
    """The wheel's `kvlint` command, installed beside this interpreter."""
    command = Path(sys.executable).parent / "kvlint"
    if not command.exists():
        pytest.fail(
            f"{command} is missing: install the kvlint-cache wheel into this venv "
            "(scripts/test.sh does)"
        )
    return str(command)


def kvlint(*args: str | os.PathLike[str]) -> str:
    """Runs `kvlint` with `args`; its standard output (exit 0 required)."""
    done = subprocess.run(
        [kvlint_command(), *map(str, args)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def kvlint_figures(*source: str | os.PathLike[str]) -> dict[str, Any]:
    """What `kvlint workload SOURCE` says, on one machine: its JSON report (without the
    request logs' summary, which only `--log` has), and its hashed traces (each format at
    16-token blocks and at the format's own)."""
    report = json.loads(kvlint("workload", *source, "--format", "json", "--no-trace-cache"))
    report.pop("log", None)
    traces = {}
    for format in ("mooncake", "mooncake-agentic", "bailian", "weka", "lmcache"):
        for block in (16, None):
            extra = ["--block-size", str(block)] if block else []
            traces[(format, block)] = kvlint(
                "workload", *source, "--export-trace", format, *extra, "--no-trace-cache"
            )
    return {"report": report, "traces": traces}


@pytest.fixture(scope="session")
def expected(log: Path) -> dict[str, Any]:
    """What `kvlint workload` says of the log."""
    return kvlint_figures(log)


@pytest.fixture(scope="session")
def parquet_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same 48 sessions as a request log in Parquet: 208 rows in the order sent, 80 to a
    file, 30 to a row group; every fifth session without a `session_id` (grouped by content)."""
    root = tmp_path_factory.mktemp("request-log") / "log"
    write_parquet_log(root, 48, 80, rows_per_group=30, unkeyed=5)
    return root


@pytest.fixture(scope="session")
def expected_log(parquet_log: Path) -> dict[str, Any]:
    """What `kvlint workload --log` says of the Parquet log."""
    return kvlint_figures("--log", parquet_log)
