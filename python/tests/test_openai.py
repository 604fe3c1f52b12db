"""kvlint_cache.openai against a real llama-server (OpenAI Chat Completions)."""

from __future__ import annotations

import json
import warnings

import openai
import pytest
from conftest import LIST_FILES, MODEL, READ_FILE

from kvlint_cache import CacheWarning, Conversation, Guard, GuardError, check
from kvlint_cache.openai import guard_http_client


def client_for(server, guard, captured=None):
    http = guard_http_client(guard)
    if captured is not None:  # after the guard's hook: sees only what is sent
        http.event_hooks = {**http.event_hooks, "request": [*http.event_hooks["request"], captured]}
    return openai.OpenAI(base_url=server.v1, api_key="none", http_client=http, max_retries=0), http


def test_a_three_turn_tool_loop_built_by_conversation_extends_each_turn(llama_server, captured):
    client, http = client_for(llama_server, lambda: Guard(mode="error"), captured)
    conversation = Conversation(strict=True)
    conversation.add_static("You are a file agent. Answer in one line.")
    conversation.add_tool(READ_FILE)
    conversation.add_tool(LIST_FILES)
    conversation.push_user("What does the README say?")
    # The tiny model answers random text: the test plays the model's tool calls.
    calls = [
        ("call_1", "list_files", {"path": "."}, "README.md\nsrc/"),
        ("call_2", "read_file", {"path": "README.md"}, "# acme\nA demo."),
    ]
    usages = []
    for turn in range(3):
        body = conversation.to_openai_chat(MODEL)
        assert body["prompt_cache_key"] == conversation.routing_key
        response = client.chat.completions.create(**body, max_tokens=8)
        usages.append(response.usage)
        if turn < 2:
            call_id, name, arguments, result = calls[turn]
            conversation.push_assistant(
                response.choices[0].message.content or "",
                [{"id": call_id, "name": name, "arguments": arguments}],
            )
            conversation.push_tool_result(call_id, result)
        else:
            conversation.push_openai_response(response.model_dump(exclude_none=True))

    sessions = http.kvlint_guard
    assert list(sessions.guards) == [conversation.routing_key]
    counters = sessions.guards[conversation.routing_key].counters
    assert counters["turns"] == 3 and counters["refused_turns"] == 0
    assert counters["recomputed_tokens"] == 0
    sent = [json.loads(raw) for raw in captured.bodies]
    assert len(sent) == 3
    assert check(sent).is_clean()
    for before, after in zip(sent, sent[1:]):
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after["tools"] == before["tools"]
    # The engine agrees: each turn is served the whole previous prompt from its cache
    # (llama-server recomputes the last token of a fully cached prompt).
    for before, after in zip(usages, usages[1:]):
        assert after.prompt_tokens_details.cached_tokens >= before.prompt_tokens - 1
    # What the engine reported came back to the guard with each answer, summed, and under
    # OpenTelemetry's GenAI names.
    guard = sessions.guards[conversation.routing_key]
    reported = guard.reported_usage
    assert reported["responses"] == 3
    assert reported["input_tokens"] == sum(usage.prompt_tokens for usage in usages)
    cached = sum(usage.prompt_tokens_details.cached_tokens for usage in usages)
    assert reported["cache_read_input_tokens"] == cached > 0
    assert guard.otel_attributes() == {
        "gen_ai.usage.input_tokens": reported["input_tokens"],
        "gen_ai.usage.cache_read.input_tokens": cached,
        "gen_ai.usage.cache_creation.input_tokens": 0,
    }


SYSTEM = "You are a terse assistant. Current time: {}."


def timestamped(stamp, *messages):
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": SYSTEM.format(stamp)}, *messages],
    }


# The next turn of the session: the same start, one answer and one question more. (Resending
# the same turn with a new clock is a retry, which costs only its tail: no break.)
NEXT_TURN = (
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "and now?"},
)


def test_a_timestamp_in_the_system_prompt_is_refused_before_it_is_sent(llama_server, captured):
    guard = Guard(mode="error")
    client, _ = client_for(llama_server, guard, captured)
    first = timestamped("2025-03-04T10:22:31Z", {"role": "user", "content": "hi"})
    answer = client.chat.completions.create(**first, max_tokens=8).choices[0].message.content or "ok"
    second = timestamped(
        "2025-03-04T10:22:48Z",
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "and now?"},
    )
    with pytest.raises(GuardError) as refused:
        client.chat.completions.create(**second, max_tokens=8)
    # Our exception, unchanged: not wrapped into APIConnectionError, not retried.
    assert not isinstance(refused.value, openai.OpenAIError)
    rules = [f.rule for f in refused.value.findings if f.severity == "error"]
    assert rules == ["volatile-timestamp"]
    assert refused.value.findings[0].turn == 1
    assert len(captured.bodies) == 1, "the refused request never reached the server"
    assert guard.counters["refused_turns"] == 1


def test_warn_mode_sends_and_warns_at_the_call(llama_server):
    client, _ = client_for(llama_server, Guard(mode="warn"))
    client.chat.completions.create(**timestamped("10:22:31", {"role": "user", "content": "hi"}), max_tokens=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response = client.chat.completions.create(  # <- the warning points here
            **timestamped("10:22:48", *NEXT_TURN), max_tokens=4
        )
    assert response.choices, "warn mode sends the request"
    cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(cache_warnings) == 1
    assert "volatile-timestamp" in str(cache_warnings[0].message)
    assert cache_warnings[0].filename == __file__


def test_the_async_client_is_guarded_too(llama_server):
    import asyncio

    from kvlint_cache.openai import guard_async_http_client

    async def run():
        http = guard_async_http_client(Guard(mode="error"))
        client = openai.AsyncOpenAI(base_url=llama_server.v1, api_key="none", http_client=http, max_retries=0)
        await client.chat.completions.create(**timestamped("10:22:31", {"role": "user", "content": "hi"}), max_tokens=4)
        with pytest.raises(GuardError):
            await client.chat.completions.create(**timestamped("10:22:48", *NEXT_TURN), max_tokens=4)

    asyncio.run(run())


def test_two_users_of_one_agent_interleaved_are_two_sessions_and_neither_is_refused(llama_server):
    """The same agent (instructions, tools and the prefix key they make), no user id: the
    guard per session tells the two conversations apart as a recording's are grouped."""
    client, http = client_for(llama_server, lambda: Guard(mode="error"))
    users = []
    for question in ("Why does the parser test fail?", "Add a --verbose flag to the CLI."):
        conversation = Conversation()
        conversation.add_static("You are a file agent. Answer in one line.")
        conversation.add_tool(READ_FILE)
        conversation.push_user(question)
        users.append(conversation)
    for follow_up in ("Go on.", "And the tests?", None):
        for conversation in users:
            response = client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
            if follow_up is not None:
                conversation.push_openai_response(response.model_dump(exclude_none=True))
                conversation.push_user(follow_up)
    guards = list(http.kvlint_guard.guards.values())
    assert [(g.counters["turns"], g.counters["refused_turns"]) for g in guards] == [(3, 0), (3, 0)]
