"""What the SDK must not hide, tried as a new user would: with the official clients against
a real llama-server. Unordered data refused at the call, tool fields kept, a compaction that
shows in the guard's counters, a summary folded into the prefix at compaction, the per-turn
tail counted as a cost, and Responses bodies the server accepts turn after turn.
"""

from __future__ import annotations

import json
import warnings

import openai
import pytest
from conftest import LIST_FILES, MODEL, READ_FILE

import kvlint_cache
from kvlint_cache import CacheWarning, Conversation, ConversationError, Guard
from kvlint_cache.openai import guard_http_client


def client_for(server, guard, captured=None):
    http = guard_http_client(guard)
    if captured is not None:  # after the guard's hook: sees only what is sent
        http.event_hooks = {**http.event_hooks, "request": [*http.event_hooks["request"], captured]}
    return openai.OpenAI(base_url=server.v1, api_key="none", http_client=http, max_retries=0), http


def test_tool_call_arguments_holding_a_set_are_refused_at_the_call():
    conversation = Conversation()
    conversation.push_user("Tag the file.")
    call = {"id": "call_1", "name": "tag", "arguments": {"path": "a.txt", "tags": {"red", "green", "blue"}}}
    # A set iterates in hash-seed order: another process would send other bytes.
    with pytest.raises(ConversationError, match=r"`tool_calls\[0\]\['arguments'\]\['tags'\]`: a Python set"):
        conversation.push_assistant("", [call])
    assert len(conversation.history) == 1, "nothing appended"
    with pytest.raises(ConversationError, match="a Python set"):
        conversation.push_user([{"type": "text", "text": "hi", "extra": [frozenset({1, 2})]}])
    # A sorted list is what to send instead.
    conversation.push_assistant("", [{**call, "arguments": {"path": "a.txt", "tags": sorted(call["arguments"]["tags"])}}])
    assert conversation.history[-1]["tool_calls"][0]["arguments"] == '{"path":"a.txt","tags":["blue","green","red"]}'


def test_add_tool_keeps_strict_in_every_api_and_the_server_takes_it(llama_server, captured):
    strict_read = {"type": "function", "function": {**READ_FILE["function"], "strict": True}}
    conversation = Conversation()
    conversation.add_tool(strict_read)
    conversation.push_user("Read the README.")
    client, _ = client_for(llama_server, Guard(mode="error"), captured)
    client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
    (sent,) = [json.loads(raw) for raw in captured.bodies]
    function = sent["tools"][0]["function"]
    # Kept, after the name, description and schema.
    assert list(function) == ["name", "description", "parameters", "strict"]
    assert function["strict"] is True
    assert conversation.preview().to_openai_responses(MODEL)["tools"][0]["strict"] is True
    assert conversation.preview().to_anthropic(MODEL)["tools"][0]["strict"] is True
    # A tool that differs only by `strict` is another tool: redefined, not "unchanged".
    twin = Conversation()
    assert twin.add_tool(READ_FILE).applied and twin.add_tool(strict_read).applied
    assert twin.preview().to_openai_chat(MODEL)["tools"][0]["function"]["strict"] is True
    # Saved and restored, it is still there.
    restored = Conversation.from_json(conversation.to_json())
    assert restored.preview().to_openai_chat(MODEL) == conversation.preview().to_openai_chat(MODEL)


OPEN_FILES = ("Open file: README.md", "Open file: src/main.rs", "Open file: Cargo.toml")


def three_turns(conversation, client):
    conversation.push_user("Which files are there?")
    for turn in range(3):
        conversation.add_turn_context(OPEN_FILES[turn])  # per-turn context, last in the body
        client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
        conversation.push_assistant(f"answer {turn}")
        conversation.push_user(f"question {turn + 1}")


def test_a_compaction_to_one_message_shows_in_the_guarded_clients_counters(llama_server):
    client, http = client_for(llama_server, lambda: Guard(mode="error"))
    conversation = Conversation()
    conversation.add_static("You are a file agent.")
    conversation.add_tool(LIST_FILES)
    three_turns(conversation, client)
    guard = http.kvlint_guard.guard_for(conversation.routing_key)
    conversation.compact(1)  # one user message left: the body reads like a new conversation
    assert len(conversation.history) == 1
    guard.expect_break()
    client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
    counters = guard.counters
    # The same session's fourth turn, not a new session's first, and its break is counted.
    assert counters["turns"] == 4 and counters["refused_turns"] == 0
    assert counters["expected_breaks"] == 1
    assert guard.findings[-1].turn == 3
    assert not guard.is_break_expected
    # The next turn extends the compacted one.
    conversation.push_assistant("answer 3")
    conversation.push_user("question 4")
    client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
    assert guard.counters["turns"] == 5 and guard.counters["expected_breaks"] == 1


def test_a_clean_session_counts_the_dropped_turn_tail_as_a_cost_not_a_break(llama_server):
    client, http = client_for(llama_server, lambda: Guard(mode="error"))
    conversation = Conversation()
    conversation.add_static("You are a file agent.")
    three_turns(conversation, client)
    counters = http.kvlint_guard.guard_for(conversation.routing_key).counters
    assert counters["breaks_by_rule"] == {}
    # Each later turn drops the turn before's context, by design.
    assert counters["costs_by_rule"] == {"history-rewrite": 2}
    assert counters["dropped_tokens"] > 0 and counters["recomputed_tokens"] == 0


def test_a_summary_folds_into_the_prefix_at_compaction_even_in_strict_mode(llama_server, captured):
    client, http = client_for(llama_server, lambda: Guard(mode="error"), captured)
    conversation = Conversation(strict=True)
    conversation.add_static("You are a file agent.")
    three_turns(conversation, client)
    # After the first request, strict mode refuses a session value, and says so.
    with pytest.raises(ConversationError) as refused:
        conversation.add_session(kvlint_cache.SUMMARY_SESSION_KEY, "The user listed files.")
    assert "strict mode refuses it" in str(refused.value)
    assert "waits for compaction" not in str(refused.value)
    assert "fold in a summary" in str(refused.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # no warning either
        cache_break = conversation.compact(1, summary="The user asked which files there are, three times.")
    assert cache_break["reused_blocks"] == 1  # the static block
    assert cache_break["applied_changes"] == [
        {"session": {"key": "summary", "text": "The user asked which files there are, three times."}}
    ]
    http.kvlint_guard.guard_for(conversation.routing_key).expect_break()
    client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=4)
    messages = json.loads(captured.bodies[-1])["messages"]
    assert messages[1] == {"role": "system", "content": "The user asked which files there are, three times."}
    assert [m["role"] for m in messages] == ["system", "system", "user"]


def test_a_multi_turn_responses_conversation_is_accepted_by_llama_server(llama_server, captured):
    client, http = client_for(llama_server, lambda: Guard(mode="error"), captured)
    conversation = Conversation(strict=True)
    conversation.add_static("You are a file agent. Answer in one line.")
    conversation.add_session("memory", "The user prefers short answers.")  # a developer item
    conversation.add_tool(LIST_FILES)
    conversation.push_user("Which files are there?")
    for turn in range(3):
        conversation.add_turn_context(OPEN_FILES[turn])
        body = conversation.to_openai_responses(MODEL)
        response = client.responses.create(**body, max_output_tokens=8)  # 400 here is the bug
        text = response.output_text or f"answer {turn}"
        if turn == 0:
            conversation.push_assistant(text, [{"id": "call_1", "name": "list_files", "arguments": {"path": "."}}])
            conversation.push_tool_result("call_1", "README.md")
        else:
            conversation.push_assistant(text)
            conversation.push_user(f"question {turn + 1}")
    sent = [json.loads(raw) for raw in captured.bodies]
    assert len(sent) == 3
    assistant_items = [item for item in sent[-1]["input"] if item.get("role") == "assistant"]
    assert len(assistant_items) == 2
    for item in assistant_items:
        assert item["type"] == "message"
        assert [part["type"] for part in item["content"]] == ["output_text"]
    for before, after in zip(sent, sent[1:]):  # each extends the one before, but its turn tier
        assert after["input"][: len(before["input"]) - 1] == before["input"][:-1]
    (guard,) = http.kvlint_guard.guards.values()
    assert guard.counters["breaks_by_rule"] == {} and guard.counters["refused_turns"] == 0


def test_the_routing_key_header_is_exported():
    assert kvlint_cache.ROUTING_KEY_HEADER == "x-kvlint-routing-key"
    assert "ROUTING_KEY_HEADER" in kvlint_cache.__all__
    conversation = Conversation()
    conversation.push_user("hi")
    assert conversation.routing_headers()[kvlint_cache.ROUTING_KEY_HEADER] == conversation.routing_key
