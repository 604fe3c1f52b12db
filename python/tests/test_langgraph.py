"""kvlint_cache.langgraph: create_react_agent + ChatOpenAI against llama-server."""

from __future__ import annotations

import json

import httpx2
import pytest
from conftest import MODEL
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from kvlint_cache import CacheWarning, Conversation, Guard, check
from kvlint_cache.langgraph import conversation_hook


@tool
def list_files(path: str) -> str:
    """List the files of a directory."""
    return "README.md\nsrc/"


def agent_for(server, hook, captured):
    model = ChatOpenAI(
        model=MODEL, base_url=server.v1, api_key="none", max_tokens=8, max_retries=0,
        http_client=httpx2.Client(event_hooks={"request": [captured]}),
    )
    return create_react_agent(model, [list_files], pre_model_hook=hook, checkpointer=InMemorySaver())


def test_each_request_extends_the_previous_one_byte_for_byte(llama_server, captured):
    hook = conversation_hook(
        Conversation, static=["You are a file agent."], tools=[list_files], guard=lambda: Guard(mode="error")
    )
    agent = agent_for(llama_server, hook, captured)
    config = {"configurable": {"thread_id": "thread-1"}}
    agent.invoke({"messages": [HumanMessage("Which files are there?")]}, config)
    # A tool round played into the thread (the tiny model never calls tools itself).
    agent.invoke(
        {"messages": [
            HumanMessage("List them."),
            AIMessage("", tool_calls=[{"id": "call_1", "name": "list_files", "args": {"path": "."}}]),
            ToolMessage("README.md\nsrc/", tool_call_id="call_1"),
        ]},
        config,
    )
    agent.invoke({"messages": [HumanMessage("Thanks. Summarize.")]}, config)

    sent = [json.loads(raw) for raw in captured.bodies]
    assert len(sent) == 3
    assert sent[0]["messages"][0]["role"] == "system"
    assert "You are a file agent." in json.dumps(sent[0]["messages"][0])
    for before, after in zip(sent, sent[1:]):
        # The serialized messages of the previous request are a prefix of this one's.
        previous = json.dumps(before["messages"], ensure_ascii=False)[:-1]
        assert json.dumps(after["messages"], ensure_ascii=False).startswith(previous)
        assert after.get("tools") == before.get("tools")
    assert check(sent).is_clean()
    assert list(hook.conversations) == ["thread-1"]
    guard = hook.guard.guards["thread-1"]
    assert guard.counters["turns"] == 3 and guard.counters["recomputed_tokens"] == 0


def test_threads_get_their_own_conversation(llama_server, captured):
    hook = conversation_hook(Conversation, static=["Be terse."])
    agent = agent_for(llama_server, hook, captured)
    for thread in ("a", "b"):
        agent.invoke({"messages": [HumanMessage(f"hello from {thread}")]}, {"configurable": {"thread_id": thread}})
    assert sorted(hook.conversations) == ["a", "b"]
    # The answer joins the conversation at the thread's next model call.
    assert len(hook.conversations["a"].history) == 1


def test_the_window_compacts_in_large_steps_and_the_guard_accepts_it(llama_server, captured):
    hook = conversation_hook(Conversation, static=["Be terse."], window=(6, 2), guard=lambda: Guard(mode="error"))
    agent = agent_for(llama_server, hook, captured)
    config = {"configurable": {"thread_id": "w"}}
    for turn in range(6):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    sent = [json.loads(raw) for raw in captured.bodies]
    lengths = [len(body["messages"]) for body in sent]
    cuts = [i for i in range(1, len(lengths)) if lengths[i] < lengths[i - 1]]
    assert len(cuts) == 1, lengths  # not a sliding window: one cut in six turns
    guard = hook.guard.guards["w"]
    # The compaction was announced to the guard: error mode did not refuse it.
    assert guard.counters["turns"] == 6 and guard.counters["refused_turns"] == 0


def test_a_rewritten_state_history_is_refused_for_a_single_conversation():
    from kvlint_cache import ConversationError

    hook = conversation_hook(Conversation(), static=["Be terse."])
    hook({"messages": [HumanMessage("one", id="1")]}, {"configurable": {"thread_id": "t"}})
    with pytest.raises(ConversationError):
        hook({"messages": [HumanMessage("edited", id="9")]}, {"configurable": {"thread_id": "t"}})


def test_a_rewritten_state_history_rebuilds_the_thread_with_a_warning():
    hook = conversation_hook(Conversation, static=["Be terse."])
    config = {"configurable": {"thread_id": "t"}}
    hook({"messages": [HumanMessage("one", id="1")]}, config)
    with pytest.warns(CacheWarning, match="rewritten"):
        result = hook({"messages": [HumanMessage("edited", id="9")]}, config)
    assert [m.content for m in result["llm_input_messages"]][-1] in ("edited", [{"type": "text", "text": "edited"}])
