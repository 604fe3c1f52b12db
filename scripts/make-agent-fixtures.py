#!/usr/bin/env python3
"""Writes fixtures/recordings/agents/: five hand-made HAR 1.2 recordings, one per way several
agents (or one agent's retries, streams and compactions) share a conversation, each modelled
on a public multi-agent example, and EXPECTED.json, the sessions each file holds as this
script built them (never as kvlint reads them). The recordings are built in the package
scripts/agent_fixtures/, one module per file.

    python3 scripts/make-agent-fixtures.py

Python 3 standard library only, no network. The output is deterministic: running it again
rewrites the same bytes (ids are hashes of fixed seeds, times are fixed).

No request carries a session key (no session header, `metadata.user_id`, `user` nor
`prompt_cache_key`): which session a request belongs to rests on its conversation alone.
Usage in the responses follows the provider's cache as this script models it (a prefix
written at a breakpoint and read by a later request that starts with it; OpenAI's automatic
cache from 1,024 tokens in steps of 128), with about four characters a token.
"""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from agent_fixtures.bedrock import BEDROCK_SOURCE, bedrock_stream_switch  # noqa: E402
from agent_fixtures.retry import RETRY_SOURCE, SDK_RETRIES, retry_after_overload  # noqa: E402
from agent_fixtures.summary import SUMMARY_SOURCE, summarizing_memory  # noqa: E402
from agent_fixtures.supervisor import (  # noqa: E402
    SUPERVISOR_SOURCE,
    supervisor_trailing_instruction,
)
from agent_fixtures.writer_critic import REFLECTION_SOURCE, writer_critic  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "recordings" / "agents"


# --- main ----------------------------------------------------------------------------------

SOURCES = {
    "bedrock-stream-switch.har": BEDROCK_SOURCE,
    "retry-after-overload.har": f"{RETRY_SOURCE} and {SDK_RETRIES}",
    "writer-critic.har": REFLECTION_SOURCE,
    "supervisor-trailing-instruction.har": SUPERVISOR_SOURCE,
    "summarizing-memory.har": SUMMARY_SOURCE,
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    recordings = [
        bedrock_stream_switch(),
        retry_after_overload(),
        writer_critic(),
        supervisor_trailing_instruction(),
        summarizing_memory(),
    ]
    expected = {
        "about": (
            "The sessions of each file in this folder as scripts/make-agent-fixtures.py built "
            "them, never as kvlint reads them. Per file: its entry count; its sessions, each "
            "the 0-based indexes of its entries in file order, `parent` the index in this list "
            "of the session whose conversation it was handed (null for none) and `retries` the "
            "requests that send the session's previous request again, byte for byte, after it "
            "got no answer (an error status); and `kinds`, one per "
            "entry: main-turn (a new user message or another agent's result appended), "
            "tool-round-trip (the new items are tool results), retry (the session's previous "
            "request sent again), side-call (a one-off call made from a session's conversation), "
            "sub-agent (the first request of a worker or critic session handed another "
            "session's conversation), compaction (the session's history rewritten). No "
            "session has a break other than at an entry of kind compaction."
        ),
        "files": {},
    }
    for recording in recordings:
        (OUT / recording.name).write_text(
            json.dumps(recording.har(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        expected["files"][recording.name] = {"source": SOURCES[recording.name], **recording.expected()}
    (OUT / "EXPECTED.json").write_text(
        json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
