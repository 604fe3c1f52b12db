"""A guarded client in a long-running service: a week of traffic, tens of thousands of
sessions, through one client. The guards and the bodies it keeps are bounded
(`kvlint_cache._http.GuardSessions`: 10,000 sessions, 1,000 bodies, the least recently used
dropped first), so that the process's memory stays flat once the bounds are reached.

The client is a real ``httpx`` client with the guard's request hook; its transport answers in
process (``httpx.MockTransport``), as the guard runs before anything is sent: what is measured
is the guard's memory, not a server's.
"""

from __future__ import annotations

import json

import httpx
import pytest

from kvlint_cache._http import install_guard

#: Sessions a phase sends: more than the sessions kept, so that every phase drops as many as
#: it starts once the bound is reached.
SESSIONS_PER_PHASE = 12_000
TURNS = 3


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    pytest.fail("no VmRSS in /proc/self/status: the memory check needs Linux's procfs")


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1},
        },
    )


def _send_sessions(client: httpx.Client, first: int, count: int) -> None:
    system = "You are the support agent of a shop. Answer in one short paragraph. " * 8
    for session in range(first, first + count):
        messages = [{"role": "system", "content": system}]
        for turn in range(TURNS):
            messages.append({"role": "user", "content": f"Question {turn} of user {session}"})
            body = {"model": "m", "user": f"user-{session}", "messages": messages}
            client.post("/v1/chat/completions", content=json.dumps(body))
            messages.append({"role": "assistant", "content": f"Answer {turn}"})


def test_a_week_of_sessions_through_one_guarded_client_holds_memory_flat() -> None:
    client = httpx.Client(base_url="http://service.invalid", transport=httpx.MockTransport(_answer))
    sessions = install_guard(client)

    # Past the bound: the process holds as many guards and bodies as it ever will.
    _send_sessions(client, 0, SESSIONS_PER_PHASE)
    assert len(sessions.guards) == 10_000
    assert len(sessions.observed) == 1_000
    settled = _rss_bytes()

    # As many sessions again: every new one drops the least recently used.
    _send_sessions(client, SESSIONS_PER_PHASE, SESSIONS_PER_PHASE)
    grown = _rss_bytes() - settled
    assert len(sessions.guards) == 10_000
    assert len(sessions.observed) == 1_000
    # The newest sessions are kept, the oldest dropped.
    assert f"user-{2 * SESSIONS_PER_PHASE - 1}" in sessions.guards
    assert "user-0" not in sessions.guards
    # Each of the 12,000 sessions of the second phase would otherwise keep its guard (its
    # last rendered turn: about 40 KB here) and its three bodies: about half a gigabyte.
    assert grown < 24 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB over the second phase"


def test_a_retry_of_a_refused_body_is_refused_again_and_never_sent() -> None:
    from kvlint_cache import Guard, GuardError

    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return _answer(request)

    client = httpx.Client(base_url="http://service.invalid", transport=httpx.MockTransport(answer))
    install_guard(client, lambda: Guard(mode="error"))

    def body(stamp: str, turns: int) -> bytes:
        messages = [{"role": "system", "content": f"Request {stamp}. Be brief."}]
        for turn in range(turns):
            if turn:
                messages.append({"role": "assistant", "content": "ok"})
            messages.append({"role": "user", "content": f"Question {turn}"})
        return json.dumps({"model": "m", "user": "ada", "messages": messages}).encode()

    client.post("/v1/chat/completions", content=body("7f3a9c2e41d04b8a", 1))
    refused = body("0b91d5e6c3a24f17", 2)
    for attempt in range(3):
        with pytest.raises(GuardError):
            client.post(
                "/v1/chat/completions",
                content=refused,
                headers={"x-stainless-retry-count": str(attempt)},
            )
    assert len(sent) == 1
