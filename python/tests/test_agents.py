"""kvlint_cache.agents: the OpenAI Agents SDK on llama-server's Chat Completions."""

from __future__ import annotations

import json

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner
from conftest import MODEL

from kvlint_cache import Guard, GuardError, check
from kvlint_cache.agents import chat_completions_model, guard_model_input


def make_agent(server, instructions="You are a terse assistant."):
    model = chat_completions_model(MODEL, base_url=server.v1, guard=lambda: Guard(mode="error"))
    return Agent(name="assistant", instructions=instructions, model=model,
                 model_settings=ModelSettings(max_tokens=8))


def test_a_multi_turn_run_is_guarded_at_the_filter_and_on_the_wire(llama_server):
    agent = make_agent(llama_server)
    inputs = guard_model_input(lambda: Guard(mode="error"))
    run_config = RunConfig(call_model_input_filter=inputs, tracing_disabled=True)
    history = [{"role": "user", "content": "hi"}]
    for turn in range(3):
        result = Runner.run_sync(agent, history, run_config=run_config)
        history = result.to_input_list() + [{"role": "user", "content": f"and {turn}?"}]
    # The filter's view: instructions + Responses input items.
    (input_guard,) = inputs.sessions.guards.values()
    assert input_guard.counters["turns"] == 3 and input_guard.counters["recomputed_tokens"] == 0
    # The wire's view: the Chat Completions bodies the model class sent.
    wire = agent.model._client._client.kvlint_guard
    bodies = [body for _, body, _ in wire.observed]
    assert len(bodies) == 3 and check(bodies).is_clean()
    assert all(outcome.is_clean() for _, _, outcome in wire.observed)
    json.dumps(bodies)


def test_changed_instructions_are_refused_from_runner_run(llama_server):
    inputs = guard_model_input(lambda: Guard(mode="error"))
    run_config = RunConfig(call_model_input_filter=inputs, tracing_disabled=True)
    agent = make_agent(llama_server, "Be terse. Time: 2025-03-04T10:22:31Z.")
    result = Runner.run_sync(agent, "hi", run_config=run_config)
    later = agent.clone(instructions="Be terse. Time: 2025-03-04T10:22:48Z.")
    with pytest.raises(GuardError) as refused:
        Runner.run_sync(later, result.to_input_list() + [{"role": "user", "content": "again"}], run_config=run_config)
    assert "volatile-timestamp" in [f.rule for f in refused.value.findings]
