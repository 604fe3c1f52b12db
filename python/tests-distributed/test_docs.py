"""docs/month-of-logs.md runs as written: every ``sh`` and ``python`` block, in order, in a fresh
folder (a Ray cluster started by the page itself), each followed by the output it printed there.
A block marked ``python skip`` is shown, not run (Spark's form of a step the page already runs).

To write the outputs after a change: ``KVLINT_BLESS_DOCS=1 pytest python/tests-distributed/test_docs.py``
(then read the diff).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "month-of-logs.md"
MAKE_LOG = Path(__file__).resolve().parent / "make_log.py"
BLOCK = re.compile(r"```(sh|python|python skip)\n(.*?)```\n\n```text\n(.*?)```\n", re.DOTALL)


def run(kind: str, code: str, folder: Path) -> str:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    command = (
        ["bash", "-euo", "pipefail", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
    )
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{kind} block failed:\n{code}\n{done.stderr[-4000:]}"
    return done.stdout


def test_the_page_runs_as_written(tmp_path: Path) -> None:
    page = PAGE.read_text()
    # The page's paths are the repository's: its log generator where the page says it is.
    (tmp_path / "python" / "tests-distributed").mkdir(parents=True)
    (tmp_path / "python" / "tests-distributed" / "make_log.py").write_text(MAKE_LOG.read_text())
    blocks = [match for match in BLOCK.finditer(page) if match.group(1) != "python skip"]
    assert len(blocks) >= 6, "the page's runnable blocks were not found"
    bless = os.environ.get("KVLINT_BLESS_DOCS") == "1"
    written = page
    for match in blocks:
        kind, code, shown = match.groups()
        printed = run(kind, code, tmp_path)
        if bless:
            written = written.replace(
                match.group(0),
                match.group(0).replace(f"```text\n{shown}```", f"```text\n{printed}```"),
                1,
            )
        else:
            assert printed == shown, f"the page shows another output for:\n{code}"
    if bless and written != page:
        PAGE.write_text(written)
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
