"""The wheel as a user gets it: installed from the file into a fresh venv, with no Rust
toolchain on PATH, it gives the `kvlint` command and the module; and pre-commit installs it
for a `language: python` hook (what `additional_dependencies: [kvlint-cache]` does once the
wheel is published).

`scripts/test.sh` builds the wheel with maturin and passes its path in KVLINT_WHEEL.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

SYSTEM = "You are a terse assistant. Current time: {}."


def wheel() -> Path:
    path = os.environ.get("KVLINT_WHEEL")
    if not path or not Path(path).is_file():
        pytest.fail("KVLINT_WHEEL must name the built wheel (scripts/test.sh builds it with maturin)")
    return Path(path)


def without_rust(environment: dict) -> dict:
    """The environment with no cargo or rustc on PATH."""
    folders = environment.get("PATH", "").split(os.pathsep)
    kept = [folder for folder in folders if not (Path(folder) / "cargo").exists()]
    return {**environment, "PATH": os.pathsep.join(kept)}


def broken_session(folder: Path) -> Path:
    """Two turns of one session whose system prompt carries the time."""
    history = [{"role": "user", "content": "hi"}]
    first = {"model": "m", "messages": [{"role": "system", "content": SYSTEM.format("10:22:31")}, *history]}
    history += [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "and now?"}]
    second = {"model": "m", "messages": [{"role": "system", "content": SYSTEM.format("10:22:48")}, *history]}
    path = folder / "session.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    return path


def test_the_wheel_installs_the_command_and_the_module_without_rust(tmp_path):
    environment = without_rust(dict(os.environ))
    assert shutil.which("cargo", path=environment["PATH"]) is None
    target = tmp_path / "venv"
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-index", str(wheel())],
        check=True, env=environment,
    )
    kvlint = target / "bin" / "kvlint"
    version = subprocess.run([kvlint, "--version"], capture_output=True, text=True, env=environment)
    assert version.returncode == 0 and version.stdout.startswith("kvlint "), version
    session = broken_session(tmp_path)
    checked = subprocess.run([kvlint, "check", session, "--format", "json"], capture_output=True, text=True, env=environment)
    assert checked.returncode == 1, checked.stderr  # findings
    assert "volatile-timestamp" in checked.stdout
    usage = subprocess.run([kvlint, "check", "--no-such-flag"], capture_output=True, text=True, env=environment)
    assert usage.returncode == 2
    imported = subprocess.run(
        [python, "-c", "import kvlint_cache; print(kvlint_cache.check([]).is_clean())"],
        capture_output=True, text=True, env=environment, cwd=tmp_path,
    )
    assert imported.stdout.strip() == "True", imported.stderr


def pre_commit() -> Path:
    home = Path(os.environ.get("KVLINT_CACHE") or Path.home() / ".cache/kvlint")
    path = Path(os.environ.get("KVLINT_PRE_COMMIT_VENV") or home / "pre-commit-venv") / "bin" / "pre-commit"
    if not path.is_file():
        pytest.fail(f"pre-commit missing at {path}: run scripts/setup-pre-commit.sh")
    return path


def test_pre_commit_runs_the_wheel_as_a_python_hook(tmp_path):
    repository = tmp_path / "repository"
    repository.mkdir()
    environment = without_rust({**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")})
    git = lambda *args: subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (repository / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: kvlint-sessions\n"
        "        name: kvlint sessions\n"
        "        entry: kvlint check\n"
        "        language: python\n"
        f"        additional_dependencies: ['{wheel()}']\n"
        "        files: '\\.jsonl$'\n"
    )
    broken_session(repository)
    git("add", "-A")
    run = subprocess.run(
        [pre_commit(), "run", "--all-files"], cwd=repository, capture_output=True, text=True, env=environment,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "volatile-timestamp" in run.stdout, run.stdout
    # Fixed (the time moved to the end of the newest message): the hook passes.
    lines = [json.loads(line) for line in (repository / "session.jsonl").read_text().splitlines()]
    for body in lines:
        body["messages"][0]["content"] = "You are a terse assistant."
    (repository / "session.jsonl").write_text("".join(json.dumps(body) + "\n" for body in lines))
    run = subprocess.run(
        [pre_commit(), "run", "--all-files"], cwd=repository, capture_output=True, text=True, env=environment,
    )
    assert run.returncode == 0, run.stdout + run.stderr
