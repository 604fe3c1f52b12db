"""A LangGraph ReAct agent whose model input is built by a Conversation (pre_model_hook).

    KVLINT_BASE_URL=http://127.0.0.1:8080/v1 python examples/langgraph_agent.py
"""

import os

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from kvlint_cache import Conversation, Guard
from kvlint_cache.langgraph import conversation_hook

BASE_URL = os.environ.get("KVLINT_BASE_URL", "http://127.0.0.1:8080/v1")
MODEL = os.environ.get("KVLINT_MODEL", "model")


@tool
def list_files() -> str:
    """List the repository's files."""
    return "README.md\nmain.py"


def main():
    model = ChatOpenAI(model=MODEL, base_url=BASE_URL, api_key=os.environ.get("OPENAI_API_KEY", "none"),
                       max_tokens=128)
    hook = conversation_hook(
        Conversation,                                  # one Conversation per thread
        static=["You are a file agent. Answer in one line."],
        tools=[list_files],
        window=(40, 10),                               # compact in large steps, not a sliding window
        guard=lambda: Guard(mode="warn"),
    )
    # prompt=None: the system text is in the conversation (a prompt would be prepended again).
    agent = create_react_agent(model, [list_files], pre_model_hook=hook, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo"}}
    for question in ("Which files are there?", "Which one is Python?"):
        state = agent.invoke({"messages": [{"role": "user", "content": question}]}, config)
        print(state["messages"][-1].content)
    print(hook.guard.guards["demo"].counters)


if __name__ == "__main__":
    main()
