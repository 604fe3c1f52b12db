"""Neovim (Debian's package, headless) with its built-in LSP client on `kvlint lsp`: the
diagnostics Neovim keeps for a template, at the byte columns Neovim counts, the hover text,
and the preferred code action applied by Neovim itself, after which the error is gone."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from test_lsp import KVLINT, TEMPLATE

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim missing: install it with scripts/setup-editors.sh (apt-get install neovim)")
def test_neovim_reads_the_diagnostics_and_applies_the_fix(tmp_path):
    template = tmp_path / "billing.j2"
    template.write_text(TEMPLATE)
    result = tmp_path / "seen.json"
    env = dict(os.environ, KVLINT=KVLINT, KVLINT_TEMPLATE=str(template), KVLINT_NVIM_RESULT=str(result))
    subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {HERE / 'neovim.lua'}"],
        env=env,
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    seen = json.loads(result.read_text())
    assert "error" not in seen, seen
    [diagnostic] = seen["diagnostics"]
    assert diagnostic["code"] == "KV101"
    assert diagnostic["severity"] == 1
    # Neovim counts columns in bytes: after the emoji (4 bytes) and the umlauts (2 each).
    first_line = TEMPLATE.split("\n")[0]
    start = first_line.index("{{ current_time }}")
    assert diagnostic["line"] == 0
    assert diagnostic["col"] == len(first_line[:start].encode())
    assert diagnostic["end_col"] == len(first_line[: start + len("{{ current_time }}")].encode())
    # The hover Neovim received names the rule and what the break costs.
    assert "KV101 volatile-timestamp" in seen["hover"]
    assert " tokens lost" in seen["hover"]
    assert any(title.startswith("Move line 1") for title in seen["actions"])
    # The line moved to the end; no other line changed.
    assert seen["after"][-1] == first_line
    assert sorted(seen["after"]) == sorted(TEMPLATE.rstrip("\n").split("\n"))
