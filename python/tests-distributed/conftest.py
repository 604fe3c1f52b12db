"""The generated log (make_log.py), files no run can trace, and the `kvlint` command the
distributed runs are held to."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from make_log import write_log


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


@pytest.fixture(scope="session")
def expected(log: Path) -> dict[str, Any]:
    """What `kvlint workload` says of the log, on one machine: its JSON report, and its hashed
    traces (each format at 16-token blocks and at the format's own)."""
    report = json.loads(kvlint("workload", log, "--format", "json", "--no-trace-cache"))
    traces = {}
    for format in ("mooncake", "mooncake-agentic", "bailian", "weka", "lmcache"):
        for block in (16, None):
            extra = ["--block-size", str(block)] if block else []
            traces[(format, block)] = kvlint(
                "workload", log, "--export-trace", format, *extra, "--no-trace-cache"
            )
    return {"report": report, "traces": traces}
