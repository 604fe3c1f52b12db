"""A tool-using loop with the anthropic client (Messages API), guarded on the wire.

    KVLINT_ANTHROPIC_URL=http://127.0.0.1:8080 python examples/anthropic_loop.py

KVLINT_ANTHROPIC_URL: the base URL without /v1 (llama-server serves /v1/messages; or
https://api.anthropic.com with ANTHROPIC_API_KEY). KVLINT_MODEL names the model.
"""

import json
import os

import anthropic

from kvlint_cache import Conversation, Guard
from kvlint_cache.anthropic import guard_http_client

BASE_URL = os.environ.get("KVLINT_ANTHROPIC_URL", "http://127.0.0.1:8080")
MODEL = os.environ.get("KVLINT_MODEL", "claude-sonnet-4-5")


def main():
    client = anthropic.Anthropic(
        base_url=BASE_URL,
        api_key=os.environ.get("ANTHROPIC_API_KEY", "none"),
        http_client=guard_http_client(lambda: Guard(mode="error")),
    )
    conversation = Conversation()
    conversation.add_static("You are a file agent. Use the tool, then answer in one line.")
    conversation.add_tool({"name": "list_files", "description": "List the repository's files.",
                           "input_schema": {"type": "object", "properties": {}}})
    conversation.push_user("Which files are in the repository?")
    for _ in range(4):
        body = conversation.to_anthropic(MODEL, max_tokens=256)
        response = client.messages.create(**body, extra_headers=conversation.routing_headers())
        conversation.push_anthropic_response(json.loads(response.model_dump_json(exclude_none=True)))
        print(f"input {response.usage.input_tokens}, cache read {response.usage.cache_read_input_tokens}")
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls:
            print("".join(block.text for block in response.content if block.type == "text"))
            break
        for call in calls:
            conversation.push_tool_result(call.id, "README.md\nmain.py")


if __name__ == "__main__":
    main()
