"""kvlint_cache.anthropic against llama-server's Anthropic Messages endpoint (/v1/messages)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest
from conftest import LIST_FILES, MODEL

from kvlint_cache import Conversation, Guard, GuardError, check
from kvlint_cache.anthropic import guard_http_client


def test_a_tool_loop_through_the_guarded_client_extends_each_turn(llama_server, captured):
    http = guard_http_client(lambda: Guard(mode="error"))
    http.event_hooks = {**http.event_hooks, "request": [*http.event_hooks["request"], captured]}
    client = anthropic.Anthropic(base_url=llama_server.url, api_key="none", http_client=http)
    conversation = Conversation(strict=True)
    conversation.add_static("You are a file agent. Answer in one line.")
    conversation.add_tool(LIST_FILES)  # OpenAI's shape: rendered as Anthropic's
    conversation.push_user("Which files are there?")
    for turn in range(3):
        body = conversation.to_anthropic(MODEL, max_tokens=8)
        response = client.messages.create(**body, extra_headers=conversation.routing_headers())
        if turn < 2:
            text = "".join(block.text for block in response.content if block.type == "text")
            conversation.push_assistant(text, [{"id": f"toolu_{turn}", "name": "list_files", "arguments": {"path": "."}}])
            conversation.push_tool_result(f"toolu_{turn}", "README.md")
        else:
            conversation.push_anthropic_response(json.loads(response.model_dump_json(exclude_none=True)))
    sent = [json.loads(raw) for raw in captured.bodies]
    assert len(sent) == 3
    assert check(sent).is_clean()
    for before, after in zip(sent, sent[1:]):
        assert after["system"] == before["system"] and after["tools"] == before["tools"]
        # cache_control breakpoints may move to the newest message; the rest is unchanged.
        strip = lambda message: json.loads(json.dumps(message).replace(', "cache_control": {"type": "ephemeral"}', ""))
        assert [strip(m) for m in after["messages"][: len(before["messages"])]] == [strip(m) for m in before["messages"]]
    (guard,) = http.kvlint_guard.guards.values()
    assert guard.counters["turns"] == 3 and guard.counters["recomputed_tokens"] == 0


def test_a_refused_request_reaches_the_caller_unwrapped_and_unretried(llama_server):
    attempts = []
    http = guard_http_client(Guard(mode="error"))
    http.event_hooks = {**http.event_hooks, "request": [lambda request: attempts.append(request.url.path), *http.event_hooks["request"]]}
    client = anthropic.Anthropic(base_url=llama_server.url, api_key="none", http_client=http)  # default retries
    system = "Be terse. Session started 2025-03-04 10:22:{}."
    first = client.messages.create(model=MODEL, max_tokens=4, system=system.format(31),
                                   messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(GuardError) as refused:
        client.messages.create(
            model=MODEL, max_tokens=4, system=system.format(48),
            messages=[{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
                      {"role": "user", "content": "more"}],
        )
    assert not isinstance(refused.value, anthropic.APIConnectionError)
    assert [f.rule for f in refused.value.findings if f.severity == "error"] == ["volatile-timestamp"]
    assert len(attempts) == 2, "one attempt each: the refused request was not retried"


def test_check_audits_anthropic_bodies_as_kvlint_check_does(tmp_path):
    """Anthropic Messages bodies imply Anthropic: `check` runs the session audit under it, as
    `kvlint check` does on the same bodies, and names a cache breakpoint that never reached the
    wire (an AI SDK `cacheControl` option dropped, say)."""
    system = "You are a careful coding agent: read before you write, and test what you change. " * 120
    first = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": system,
             "messages": [{"role": "user", "content": "Hello."}]}
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "Hi."},
                                    {"role": "user", "content": "Go on."}]}
    marked = [{**body, "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]}
              for body in (first, second)]
    for bodies, expected in (([first, second], True), (marked, False)):
        rules = [finding.rule for finding in check(bodies)]
        assert ("no-cache-breakpoint" in rules) is expected, rules
        session = tmp_path / "session.jsonl"
        session.write_text("".join(json.dumps(body) + "\n" for body in bodies))
        kvlint = Path(sys.executable).with_name("kvlint")
        printed = subprocess.run([kvlint, "check", str(session), "--format", "json"], capture_output=True, text=True, check=False)
        assert printed.returncode in (0, 1), printed.stderr
        report = json.loads(printed.stdout)
        command_rules = [finding["rule"] for session in report["sessions"] for finding in session["findings"]]
        assert sorted(command_rules) == sorted(rules)
