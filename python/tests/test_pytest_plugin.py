"""The pytest plugin `kvlint` (entry point pytest11), run with pytester against llama-server."""

from __future__ import annotations


INNER = '''
import os

import openai
import pytest

from kvlint_cache import Conversation
from kvlint_cache.pytest_plugin import assert_prefix_stable

URL = os.environ["KVLINT_TEST_LLAMA_V1"]


def client():
    return openai.OpenAI(base_url=URL, api_key="none", max_retries=0)


@pytest.mark.kvlint_prefix_stable
def test_clean_loop():
    conversation = Conversation()
    conversation.add_static("Be terse.")
    conversation.push_user("hi")
    for turn in range(2):
        response = client().chat.completions.create(**conversation.to_openai_chat("m"), max_tokens=4)
        conversation.push_openai_response(response.model_dump(exclude_none=True))
        conversation.push_user(f"more {turn}")


@pytest.mark.kvlint_prefix_stable
def test_two_conversations_one_after_the_other():
    # Same tools and instructions, so the same prompt_cache_key: the second starts a session.
    for task in ("Fix the test.", "Write the docs."):
        conversation = Conversation()
        conversation.add_static("Be terse.")
        conversation.push_user(task)
        for turn in range(2):
            response = client().chat.completions.create(**conversation.to_openai_chat("m"), max_tokens=4)
            conversation.push_openai_response(response.model_dump(exclude_none=True))
            conversation.push_user(f"more {turn}")


@pytest.mark.kvlint_prefix_stable
def test_timestamp_in_system_prompt():
    history = [{"role": "user", "content": "hi"}]
    for stamp in ("10:22:31", "10:22:48"):
        client().chat.completions.create(
            model="m", max_tokens=4,
            messages=[{"role": "system", "content": f"Be terse. Now: 2025-03-04T{stamp}Z"}, *history],
        )
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]


def test_fixture_by_hand(kvlint_guard):
    for user in ("a", "b"):  # two sessions, told apart by prompt_cache_key
        messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": f"hi, {user} here"}]
        for turn in range(2):
            response = client().chat.completions.create(
                model="m", max_tokens=4, prompt_cache_key=user, messages=messages,
            )
            messages = messages + [
                {"role": "assistant", "content": response.choices[0].message.content or "ok"},
                {"role": "user", "content": f"more {turn}"},
            ]
    assert sorted(kvlint_guard.guards) == ["a", "b"]
    assert len(kvlint_guard.bodies) == 4
    assert_prefix_stable(kvlint_guard)
'''


def test_the_marker_fails_a_test_that_breaks_the_prefix(pytester, llama_server, monkeypatch):
    monkeypatch.setenv("KVLINT_TEST_LLAMA_V1", llama_server.v1)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-rf")  # the plugin loads by its entry point
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_timestamp_in_system_prompt*", "*volatile-timestamp*turn 1*"])


def test_the_plugin_is_registered_by_its_entry_point(pytester):
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["*kvlint_prefix_stable*"])
