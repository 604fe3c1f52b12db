"""A small generated log of agent sessions, for the distributed recipes' tests and the docs page
"From a month of logs to a benchmark and a fleet decision" (docs/month-of-logs.md).

Agent sessions of three applications (each with its own system prompt and tools, shared by its
sessions), two to seven turns each, times a few seconds apart, answers with their reported usage;
every ninth session puts the time in its system prompt (a break every turn), one file is gzip
compressed. The same seed gives the same files.

    python make_log.py OUT SESSIONS
"""

from __future__ import annotations

import gzip
import heapq
import json
import random
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

APPLICATIONS = [
    (
        (
            "You are a coding agent for the repository `acme-api`. Read before you edit, run the "
            "tests after every change, and keep your answers short."
        ),
        ["read_file", "write_file", "run_tests"],
    ),
    (
        (
            "You are a support agent for Example Bank. Never ask for a full card number. Look the "
            "customer up before answering and escalate disputes over 500 euros."
        ),
        ["lookup_customer", "open_ticket"],
    ),
    (
        (
            "You summarize research papers for a reading group: the question, the method, the main "
            "result and one open problem, in that order."
        ),
        [],
    ),
]

WORDS = [
    "the",
    "a",
    "test",
    "module",
    "function",
    "error",
    "value",
    "request",
    "cache",
    "token",
    "prefix",
    "session",
    "user",
    "answer",
    "file",
    "line",
    "change",
    "result",
    "method",
    "paper",
    "customer",
    "ticket",
    "account",
    "number",
    "query",
    "engine",
    "block",
]


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} and return the result as text.",
            "parameters": {
                "type": "object",
                "properties": {"argument": {"type": "string"}},
                "required": ["argument"],
            },
        },
    }


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _session(rng: random.Random, start: float, timestamped: bool) -> list[dict[str, Any]]:
    system, tools = rng.choice(APPLICATIONS)
    messages: list[dict[str, Any]] = []
    lines = []
    time = start
    for turn in range(rng.randint(2, 7)):
        messages.append({"role": "user", "content": _text(rng, rng.randint(5, 60))})
        prompt = system
        if timestamped:
            prompt += f"\nCurrent time: {time:.0f}"
        body: dict[str, Any] = {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": prompt}, *messages],
        }
        if tools:
            body["tools"] = [_tool(name) for name in tools]
        answer = _text(rng, rng.randint(3, 80))
        response = {
            "choices": [{"message": {"role": "assistant", "content": answer}}],
            "usage": {"completion_tokens": rng.randint(3, 120)},
        }
        lines.append({"time": time, "request": body, "response": response})
        messages.append({"role": "assistant", "content": answer})
        time += rng.uniform(0.5, 30.0)
    return lines


def _sessions(sessions: int, seed: int) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """The generated sessions, numbered: the same seed gives the same ones."""
    rng = random.Random(seed)
    start = 1_764_000_000.0
    for number in range(sessions):
        start += rng.uniform(0.1, 20.0)
        yield number, _session(rng, start, timestamped=number % 9 == 4)


def write_log(root: Path, sessions: int, seed: int = 7) -> list[Path]:
    """Writes `sessions` generated sessions under `root`; returns the files written."""
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for number, lines in _sessions(sessions, seed):
        text = "".join(json.dumps(line) + "\n" for line in lines)
        if number == 3:
            path = root / f"session-{number:04}.jsonl.gz"
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path = root / f"session-{number:04}.jsonl"
            path.write_text(text)
        files.append(path)
    return files


def write_har_log(root: Path, sessions: int, per_file: int, seed: int = 7) -> list[Path]:
    """Writes the same `sessions` as :func:`write_log`, `per_file` to an HTTP Archive (as a
    proxy in front of the engine captures them): each request under its session's
    `x-claude-code-session-id` header, the entries of a file in time order; returns the files
    written."""
    root.mkdir(parents=True, exist_ok=True)
    files = []
    entries: list[tuple[float, dict[str, Any]]] = []
    for number, lines in _sessions(sessions, seed):
        for line in lines:
            started = datetime.fromtimestamp(line["time"], timezone.utc)
            entries.append(
                (
                    line["time"],
                    {
                        "startedDateTime": started.isoformat(timespec="milliseconds"),
                        "request": {
                            "method": "POST",
                            "url": "http://engine/v1/chat/completions",
                            "headers": [
                                {"name": "x-claude-code-session-id", "value": f"s{number}"}
                            ],
                            "postData": {
                                "mimeType": "application/json",
                                "text": json.dumps(line["request"]),
                            },
                        },
                        "response": {
                            "status": 200,
                            "content": {
                                "mimeType": "application/json",
                                "text": json.dumps(line["response"]),
                            },
                        },
                    },
                )
            )
        if (number + 1) % per_file == 0 or number + 1 == sessions:
            entries.sort(key=lambda entry: entry[0])
            path = root / f"capture-{len(files):04}.har"
            har = {"log": {"version": "1.2", "entries": [entry for _, entry in entries]}}
            path.write_text(json.dumps(har))
            files.append(path)
            entries = []
    return files


def _rows_in_time_order(sessions: int, seed: int) -> Iterator[tuple[float, int, dict[str, Any]]]:
    """The requests of the same sessions as :func:`write_log`, each with its session's number,
    in the order they were sent (sessions interleaved, as a request log holds them). Sessions
    start in order, so a request sent before a session starts is final: only the sessions in
    flight are held."""
    pending: list[tuple[float, int, int, dict[str, Any]]] = []
    for number, lines in _sessions(sessions, seed):
        start = lines[0]["time"]
        while pending and pending[0][0] < start:
            time, session, _, line = heapq.heappop(pending)
            yield time, session, line
        for turn, line in enumerate(lines):
            heapq.heappush(pending, (line["time"], number, turn, line))
    while pending:
        time, session, _, line = heapq.heappop(pending)
        yield time, session, line


def write_parquet_log(
    root: Path,
    sessions: int,
    rows_per_file: int,
    seed: int = 7,
    rows_per_group: int = 20_000,
    unkeyed: int = 0,
) -> list[Path]:
    """Writes the same `sessions` as :func:`write_log` as a request log in Parquet, one row per
    request in the order sent, `rows_per_file` to a file (zstd): `session_id` (text; null for
    every `unkeyed`-th session when `unkeyed` is not 0), `time` (a UTC timestamp, microseconds),
    `request` and `response` (their JSON as text). Returns the files written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("session_id", pa.string()),
            ("time", pa.timestamp("us", tz="UTC")),
            ("request", pa.string()),
            ("response", pa.string()),
        ]
    )
    root.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    writer: Any = None
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}

    def flush() -> None:
        if columns["time"]:
            writer.write_table(pa.Table.from_pydict(columns, schema=schema))
            for values in columns.values():
                values.clear()

    for written, (time, session, line) in enumerate(_rows_in_time_order(sessions, seed)):
        if written % rows_per_file == 0:
            if writer is not None:
                flush()
                writer.close()
            files.append(root / f"requests-{len(files):04}.parquet")
            writer = pq.ParquetWriter(files[-1], schema, compression="zstd")
        keyless = unkeyed and session % unkeyed == unkeyed - 1
        columns["session_id"].append(None if keyless else f"s{session}")
        columns["time"].append(round(time * 1e6))
        columns["request"].append(json.dumps(line["request"]))
        columns["response"].append(json.dumps(line["response"]))
        if len(columns["time"]) == rows_per_group:
            flush()
    if writer is not None:
        flush()
        writer.close()
    return files


if __name__ == "__main__":
    out, sessions = sys.argv[1], int(sys.argv[2])
    written = write_log(Path(out), sessions)
    print(f"{len(written)} session files in {out}")
