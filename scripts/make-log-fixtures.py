#!/usr/bin/env python3
"""Writes fixtures/logs/: request logs of three interleaved agent sessions in every form
`kvlint workload --log` reads, the same sessions as session files, and a Langfuse export.

The Parquet files are written by pyarrow, an implementation independent of kvlint's reader
(the `parquet` crate). Run with a Python that has pyarrow:

    /root/.cache/kvlint/dist-venv/bin/python scripts/make-log-fixtures.py

The output is deterministic: running it again rewrites the same bytes (gzip without a file
name or time)."""

import gzip
import json
import pathlib
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "logs"

# Session a: a coding agent on the OpenAI chat API; b: a support bot on the same API, another
# model; c: a research agent on Anthropic's Messages API. Each turn appends the answer and
# the next user message, so each turn extends the one before.
SESSIONS = {
    "a": {
        "format": "openai",
        "model": "gpt-4o",
        "endpoint": "/v1/chat/completions",
        "team": "coding",
        "system": "You are a coding agent working in the repository `acme-api`. Read before you edit and run the tests after every change.",
        "users": [
            "Add a health check endpoint that returns the build version.",
            "The tests fail with an import error in `server/health.py`; fix it.",
            "Now document the endpoint in the README under Operations.",
        ],
        "answers": [
            "I added `GET /healthz` in `server/health.py`, returning the version from `BUILD_INFO`.",
            "The module imported `build_info` from the wrong package; it now imports `acme.build`.",
            "Documented `GET /healthz` under Operations, with an example response.",
        ],
        "times": [1_764_669_600, 1_764_669_609, 1_764_669_640],
    },
    "b": {
        "format": "openai",
        "model": "gpt-4o-mini",
        "endpoint": "/v1/chat/completions",
        "team": "support",
        "system": "You answer customers of Acme Cloud. Be brief and link the documentation page you rely on.",
        "users": [
            "How do I rotate my API key without downtime?",
            "Will the old key stop working at once?",
            "Thanks. Can I automate the rotation?",
        ],
        "answers": [
            "Create a second key, deploy it, then revoke the first: see docs/keys#rotation.",
            "No: a revoked key keeps working for 10 minutes, so clients can switch.",
            "Yes, with the `keys rotate` command of the CLI in a scheduled job.",
        ],
        "times": [1_764_669_603, 1_764_669_620, 1_764_673_300],
    },
    "c": {
        "format": "anthropic",
        "model": "claude-sonnet-4-5",
        "endpoint": "/v1/messages",
        "team": "research",
        "system": "You are a research assistant. Cite the sources you use by their title.",
        "users": [
            "Summarize what is known about prefix caching in LLM serving.",
            "Which engines implement it with hashed blocks?",
            "Compare their block sizes.",
        ],
        "answers": [
            "Prefix caching reuses the KV cache of a prompt's exact token prefix across requests.",
            "vLLM and SGLang hash fixed-size blocks; llama.cpp keeps whole slots.",
            "vLLM uses 16-token blocks by default; SGLang pages of 1 token or more.",
        ],
        "times": [1_764_669_612, 1_764_669_650, 1_764_676_900],
    },
}


def body(session, turn):
    """The request body of `turn` (from 0) of `session`."""
    messages = []
    for earlier in range(turn):
        messages.append({"role": "user", "content": session["users"][earlier]})
        messages.append({"role": "assistant", "content": session["answers"][earlier]})
    messages.append({"role": "user", "content": session["users"][turn]})
    if session["format"] == "anthropic":
        return {
            "model": session["model"],
            "max_tokens": 1024,
            "system": session["system"],
            "messages": messages,
        }
    return {
        "model": session["model"],
        "messages": [{"role": "system", "content": session["system"]}] + messages,
    }


def response(session, turn):
    answer = session["answers"][turn]
    tokens = len(answer.split())
    if session["format"] == "anthropic":
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": answer}],
            "usage": {"output_tokens": tokens},
        }
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
        "usage": {"completion_tokens": tokens},
    }


def rfc3339(seconds):
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def rows():
    """Every request of every session, in time order, as log rows (pair form)."""
    found = []
    for name, session in SESSIONS.items():
        for turn, time in enumerate(session["times"]):
            found.append(
                {
                    "time": time,
                    "endpoint": session["endpoint"],
                    "headers": {"x-team": session["team"]},
                    "request": body(session, turn),
                    "response": response(session, turn),
                }
            )
    # Not a prompt: counted as such, never grouped.
    found.append(
        {
            "time": 1_764_669_630,
            "endpoint": "/v1/embeddings",
            "headers": {"x-team": "coding"},
            "request": {"model": "text-embedding-3-small", "input": "health check"},
        }
    )
    found.sort(key=lambda row: row["time"])
    return found


def write_session_files():
    folder = OUT / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    for name, session in SESSIONS.items():
        lines = [
            compact(
                {
                    "request": body(session, turn),
                    "response": response(session, turn),
                    "time": time,
                }
            )
            for turn, time in enumerate(session["times"])
        ]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def write_logs():
    lines = []
    for row in rows():
        line = dict(row)
        line["time"] = rfc3339(row["time"])
        lines.append(compact(line))
    text = ("\n".join(lines) + "\n").encode()
    (OUT / "interleaved.jsonl").write_bytes(text)
    (OUT / "interleaved.jsonl.gz").write_bytes(gzip.compress(text, mtime=0))
    (OUT / "interleaved.jsonl.zst").write_bytes(
        pa.compress(text, codec="zstd", asbytes=True)
    )
    table = pa.table(
        {
            "time": pa.array(
                [row["time"] * 1000 for row in rows()], pa.timestamp("ms", tz="UTC")
            ),
            "endpoint": [row["endpoint"] for row in rows()],
            "headers": pa.array(
                [list(row["headers"].items()) for row in rows()],
                pa.map_(pa.string(), pa.string()),
            ),
            "request": [compact(row["request"]) for row in rows()],
            "response": [
                compact(row["response"]) if "response" in row else None for row in rows()
            ],
        }
    )
    # Several row groups, snappy pages (pyarrow's default codec).
    pq.write_table(table, OUT / "interleaved.parquet", row_group_size=4)


def write_langfuse():
    """Two conversations that are the same word for word, told apart only by their trace's
    session_id (without it, both second turns would continue the first conversation), and a
    span that is no generation."""
    opening = [
        {"role": "system", "content": "You are Acme's assistant."},
        {"role": "user", "content": "What is my current plan?"},
    ]
    follow_up = {"role": "user", "content": "And what does upgrading cost?"}
    observations = []
    for number, session_id in enumerate(["sess-alpha", "sess-beta"]):
        start = 1_764_669_600 + number * 5
        answer = {"role": "assistant", "content": "You are on the Team plan."}
        observations.append(
            {
                "id": f"obs-{number}-0",
                "trace_id": f"trace-{number}",
                "type": "GENERATION",
                "start_time": start,
                "provided_model_name": "gpt-4o",
                "session_id": session_id,
                "input": opening,
                "output": answer,
                "usage_details": {"input": 20, "output": 9, "total": 29},
            }
        )
        observations.append(
            {
                "id": f"obs-{number}-1",
                "trace_id": f"trace-{number}",
                "type": "GENERATION",
                "start_time": start + 60,
                "provided_model_name": "gpt-4o",
                "session_id": session_id,
                "input": opening + [answer, follow_up],
                "output": {"role": "assistant", "content": "Upgrading costs $20 a seat."},
                "usage_details": {"input": 40, "output": 6, "total": 46},
            }
        )
    observations.append(
        {
            "id": "obs-span",
            "trace_id": "trace-0",
            "type": "SPAN",
            "start_time": 1_764_669_601,
            "provided_model_name": None,
            "session_id": "sess-alpha",
            "input": {"query": "plan lookup"},
            "output": None,
            "usage_details": {},
        }
    )
    observations.sort(key=lambda row: (row["start_time"], row["id"]))

    def clickhouse_time(seconds):
        return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.000")

    # As ClickHouse's JSONEachRow writes the observations table: input and output are
    # String columns holding JSON, times DateTime64(3), usage_details a Map.
    lines = []
    for row in observations:
        line = dict(row)
        line["start_time"] = clickhouse_time(row["start_time"])
        line["input"] = compact(row["input"])
        line["output"] = None if row["output"] is None else compact(row["output"])
        lines.append(compact(line))
    (OUT / "langfuse.jsonl").write_text("\n".join(lines) + "\n")
    table = pa.table(
        {
            "id": [row["id"] for row in observations],
            "trace_id": [row["trace_id"] for row in observations],
            "type": [row["type"] for row in observations],
            "start_time": pa.array(
                [row["start_time"] * 1000 for row in observations],
                pa.timestamp("ms"),
            ),
            "provided_model_name": [row["provided_model_name"] for row in observations],
            "session_id": [row["session_id"] for row in observations],
            "input": [compact(row["input"]) for row in observations],
            "output": [
                None if row["output"] is None else compact(row["output"])
                for row in observations
            ],
            "usage_details": pa.array(
                [list(row["usage_details"].items()) for row in observations],
                pa.map_(pa.string(), pa.uint64()),
            ),
        }
    )
    pq.write_table(table, OUT / "langfuse.parquet", compression="zstd")


def write_bad():
    """A log whose rows are good, broken and hostile, one of each, line by line."""
    good = compact(
        {
            "time": rfc3339(1_764_669_600),
            "endpoint": "/v1/chat/completions",
            "request": body(SESSIONS["a"], 0),
        }
    ).encode()
    lines = [
        good,  # 1: used
        b'{"time": "2025-12-02T10:00:00Z", "request": {"model": "gpt-4o", "messages": [',  # 2: invalid JSON
        b'{"model": "gpt-4o", "prompt_of_no_api": "hi"}',  # 3: an unknown body format
        b"[1, 2, 3]",  # 4: not an object
        b"\xff\xfe\x00binary\x00garbage\x9c",  # 5: not UTF-8
        b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}",  # 6: nested past serde's limit
        b"",  # 7: blank, passed over
        compact(
            {
                "time": rfc3339(1_764_669_700),
                "endpoint": "/v1/embeddings",
                "request": {"model": "text-embedding-3-small", "input": "x"},
            }
        ).encode(),  # 8: not a prompt
    ]
    (OUT / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    write_session_files()
    write_logs()
    write_langfuse()
    write_bad()
