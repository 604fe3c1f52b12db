"""A full agent loop in the Anthropic format: thinking blocks, an image, a checkpoint/restore
between turns, a compaction, and planted mistakes, each of which must raise or warn at the
call that made it. Every body the guard accepts is sent to llama-server's /v1/messages (its
tiny vision projector takes the image), which must accept it.
"""

from __future__ import annotations

import copy
import warnings

import anthropic
import pytest
from conftest import LIST_FILES, MODEL, PNG_BASE64

from kvlint_cache import CacheWarning, Conversation, ConversationError, Guard, GuardError

THINKING = {"type": "thinking", "thinking": "The user wants the files listed.", "signature": "c2lnbmF0dXJl"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}}


def without_breakpoints(blocks):
    """Content blocks without the `cache_control` marker the newest message carries."""
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]


def caught_here(record):
    """The CacheWarnings recorded, each of which must point at this file."""
    found = [w for w in record if issubclass(w.category, CacheWarning)]
    for w in found:
        assert w.filename == __file__, f"warned at {w.filename}:{w.lineno}, not at the call"
    return found


def test_a_text_loop_with_thinking_and_a_restore_is_served_from_cache(llama_server):
    client = anthropic.Anthropic(base_url=llama_server.url, api_key="none", max_retries=0)
    guard = Guard(mode="error")
    conversation = Conversation(strict=True)
    conversation.add_static("You are a file agent.")
    conversation.add_tool(LIST_FILES)
    conversation.add_session("memory", "The user prefers short answers.")
    conversation.push_user("Which files are there?")
    for turn in range(3):
        body = conversation.to_anthropic(MODEL, max_tokens=8)
        assert guard.observe(body).is_clean()
        response = client.messages.create(**body)
        if turn < 2:
            conversation.push_assistant(
                "".join(b.text for b in response.content if b.type == "text"),
                [{"id": f"toolu_{turn}", "name": "list_files", "arguments": {"path": "."}}],
                thinking=[THINKING],
            )
            conversation.push_tool_result(f"toolu_{turn}", "README.md")
            # Checkpoint between turns: the restored conversation sends the same bytes.
            twin = Conversation.from_json(conversation.to_json())
            assert twin.preview().to_anthropic(MODEL, max_tokens=8) == conversation.preview().to_anthropic(MODEL, max_tokens=8)
            conversation = twin
    # Thinking blocks are sent back verbatim, signature included.
    assert THINKING in body["messages"][1]["content"]


def test_the_full_loop_with_an_image_a_compaction_and_planted_mistakes(llama_server):
    guard = Guard(mode="error")
    client = anthropic.Anthropic(base_url=llama_server.url, api_key="none", max_retries=0)

    def sent(body):
        """Guarded, then sent: the server must accept it."""
        outcome = guard.observe(body)
        client.messages.create(**{**body, "max_tokens": 4})
        return outcome

    conversation = Conversation()  # non-strict: mistakes that keep the call valid warn

    # Planted mistake 1: a timestamp in the static tier warns at add_static.
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        conversation.add_static("You are a file agent. Today is 2025-03-04T10:22:31Z.")
    (warning,) = caught_here(record)
    assert "volatile" in str(warning.message) or "timestamp" in str(warning.message)

    conversation.add_tool(LIST_FILES)
    conversation.push_user([{"type": "text", "text": "What is in this picture?"}, IMAGE])
    body = conversation.to_anthropic(MODEL)
    assert IMAGE in without_breakpoints(body["messages"][0]["content"])
    assert sent(body).is_clean()

    conversation.push_assistant("", [{"id": "toolu_1", "name": "list_files", "arguments": '{"path": "."}'}],
                                thinking=[THINKING, REDACTED])

    # Planted mistake 2: a tool result for a call nobody made is refused at the call.
    with pytest.raises(ConversationError):
        conversation.push_tool_result("toolu_404", "nothing")
    # Planted mistake 3: an empty message is refused at the call.
    with pytest.raises(ConversationError):
        conversation.push_user("")

    conversation.push_tool_result("toolu_1", [{"type": "text", "text": "README.md"}])

    # Checkpoint and restore between turns.
    conversation = Conversation.from_json(conversation.to_json())
    conversation.add_turn_context("Current time: 2025-03-04T10:22:40Z")
    body = conversation.to_anthropic(MODEL)
    assert [b["type"] for b in body["messages"][1]["content"]][:2] == ["thinking", "redacted_thinking"]
    outcome = sent(body)
    assert outcome.is_clean()

    # Planted mistake 4: a tool added after the first request waits for compaction, warned.
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        change = conversation.add_tool({"name": "read_file", "description": "Read a file.",
                                        "input_schema": {"type": "object", "properties": {}}})
    assert change.deferred and not change
    assert len(caught_here(record)) == 1
    assert len(conversation.pending_changes) == 1

    # Planted mistake 5: a hand-edited body (history rewritten) is refused by the guard.
    edited = copy.deepcopy(conversation.preview().to_anthropic(MODEL))
    edited["messages"][0]["content"][0]["text"] = "What is in this photo?"
    with pytest.raises(GuardError) as refused:
        guard.observe(edited)
    assert any(f.severity == "error" for f in refused.value.findings)

    conversation.push_assistant("A README and a 1x1 image.")
    conversation.push_user("Thanks.")
    assert sent(conversation.to_anthropic(MODEL)).is_clean()

    # A compaction on purpose: announced, so the guard accepts the break and counts it.
    cache_break = conversation.compact(2)
    assert isinstance(cache_break, dict)
    assert conversation.pending_changes == []  # the waiting tool is applied now
    assert cache_break["lost_blocks"] > 0
    guard.expect_break()
    after = conversation.to_anthropic(MODEL)
    sent(after)  # not refused
    assert guard.counters["refused_turns"] == 1  # the hand-edited body only
    assert {t["name"] for t in after["tools"]} == {"list_files", "read_file"}

    # A restore after the compaction still sends the same bytes.
    restored = Conversation.from_json(conversation.to_json())
    assert restored.preview().to_anthropic(MODEL) == conversation.preview().to_anthropic(MODEL)


def test_strict_mode_refuses_what_non_strict_mode_warns_about():
    conversation = Conversation(strict=True)
    with pytest.raises(ConversationError):
        conversation.add_static("Today is 2025-03-04T10:22:31Z.")
    conversation.add_static("You are a file agent.")
    conversation.push_user("hi")
    conversation.to_anthropic(MODEL)
    with pytest.raises(ConversationError):
        conversation.add_static("One more rule.")


def test_a_compaction_that_must_keep_more_says_so_at_the_call():
    conversation = Conversation()
    conversation.push_user("List the files, then read each.")
    for turn in range(4):
        call = {"id": f"call_{turn}", "name": "list_files", "arguments": {"path": "."}}
        conversation.push_assistant("", [call])
        conversation.push_tool_result(f"call_{turn}", "README.md")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cache_break = conversation.compact(2)
    (warning,) = caught_here(record)
    assert "more than asked" in str(warning.message)
    # The user's task stays first: Anthropic and Bedrock reject an assistant message first.
    assert cache_break["kept_beyond_asked"] == 7
    assert conversation.history[0]["role"] == "user"
