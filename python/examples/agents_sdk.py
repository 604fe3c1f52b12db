"""The OpenAI Agents SDK on an OpenAI-compatible server (Chat Completions), guarded twice:
the model input before each call (call_model_input_filter) and the bytes on the wire.

    KVLINT_BASE_URL=http://127.0.0.1:8080/v1 python examples/agents_sdk.py
"""

import os

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool

from kvlint_cache import Guard
from kvlint_cache.agents import chat_completions_model, guard_model_input

BASE_URL = os.environ.get("KVLINT_BASE_URL", "http://127.0.0.1:8080/v1")
MODEL = os.environ.get("KVLINT_MODEL", "model")


@function_tool
def list_files() -> str:
    """List the repository's files."""
    return "README.md\nmain.py"


def main():
    agent = Agent(
        name="files",
        instructions="You are a file agent. Answer in one line.",
        tools=[list_files],
        model=chat_completions_model(MODEL, base_url=BASE_URL, api_key=os.environ.get("OPENAI_API_KEY", "none"),
                                     guard=lambda: Guard(mode="error")),
        model_settings=ModelSettings(max_tokens=128),
    )
    run_config = RunConfig(call_model_input_filter=guard_model_input(lambda: Guard(mode="error")),
                           tracing_disabled=True)  # no trace export to OpenAI from a local server
    history = []
    for question in ("Which files are there?", "Which one is Python?"):
        result = Runner.run_sync(agent, history + [{"role": "user", "content": question}], run_config=run_config)
        print(result.final_output)
        history = result.to_input_list()


if __name__ == "__main__":
    main()
