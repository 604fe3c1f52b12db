"""A tool-using loop with the openai client, built by a Conversation and guarded on the wire.

    KVLINT_BASE_URL=http://127.0.0.1:8080/v1 python examples/openai_loop.py

KVLINT_BASE_URL: any OpenAI-compatible server (llama-server, vLLM, SGLang, api.openai.com/v1);
KVLINT_MODEL and OPENAI_API_KEY as that server needs.
"""

import json
import os

import openai

from kvlint_cache import Conversation, Guard
from kvlint_cache.openai import guard_http_client

BASE_URL = os.environ.get("KVLINT_BASE_URL", "http://127.0.0.1:8080/v1")
MODEL = os.environ.get("KVLINT_MODEL", "model")
FILES = {"README.md": "# acme\nA demo repository.", "main.py": "print('hi')"}


def run_tool(name, arguments):
    if name == "list_files":
        return "\n".join(FILES)
    return FILES.get(json.loads(arguments).get("path", ""), "no such file")


def main():
    client = openai.OpenAI(
        base_url=BASE_URL,
        api_key=os.environ.get("OPENAI_API_KEY", "none"),
        http_client=guard_http_client(lambda: Guard(mode="error")),  # refuses a cache break
    )
    conversation = Conversation()
    conversation.add_static("You are a file agent. Use the tools, then answer in one line.")
    for name in ("list_files", "read_file"):
        conversation.add_tool({"type": "function", "function": {
            "name": name, "description": f"{name.replace('_', ' ')}.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
    conversation.push_user("What does the README say?")
    for _ in range(4):
        response = client.chat.completions.create(**conversation.to_openai_chat(MODEL), max_tokens=128)
        conversation.push_openai_response(response.model_dump(exclude_none=True))
        message = response.choices[0].message
        usage = response.usage
        cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
        print(f"prompt {usage.prompt_tokens} tokens, {cached} cached")
        if not message.tool_calls:
            print(message.content)
            break
        for call in message.tool_calls:
            conversation.push_tool_result(call.id, run_tool(call.function.name, call.function.arguments))


if __name__ == "__main__":
    main()
