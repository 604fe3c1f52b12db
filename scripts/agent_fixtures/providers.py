"""The SDK headers and the OpenAI chat and Anthropic Messages calls the fixtures make."""

import json
from datetime import timedelta

from . import compact, ident, tokens


# --- SDK headers ---------------------------------------------------------------------------


def stainless(package, version, retry=0, extra=()):
    """The headers Stainless-generated SDKs (openai-python, anthropic-sdk-python) send."""
    return [
        ("accept", "application/json"),
        ("accept-encoding", "gzip, deflate"),
        ("connection", "keep-alive"),
        ("content-type", "application/json"),
        ("user-agent", f"{package}/Python {version}"),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", version),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
        ("x-stainless-runtime-version", "3.12.8"),
        ("x-stainless-async", "false"),
        ("x-stainless-retry-count", str(retry)),
        ("x-stainless-read-timeout", "600"),
        *extra,
    ]


def anthropic_headers(retry=0):
    return stainless(
        "Anthropic",
        "0.75.0",
        retry,
        [("anthropic-version", "2023-06-01"), ("x-stainless-timeout", "600")],
    )


def openai_headers():
    return stainless("OpenAI", "1.109.1")


# --- OpenAI chat ---------------------------------------------------------------------------

OPENAI_URL = "https://api.openai.com/v1/chat/completions"


def openai_render(body):
    """The prompt as the cache sees it: the tools, then each message."""
    parts = [compact(body.get("tools", []))]
    for message in body["messages"]:
        parts.append(f"<|{message['role']}|>{message.get('name', '')}\n")
        parts.append(message.get("content") or "")
        if message.get("tool_calls"):
            parts.append(compact(message["tool_calls"]))
        parts.append("<|end|>")
    return "".join(parts)


def openai_response(seed, created, model, message, finish, prompt, cached, fingerprint):
    completion = tokens((message.get("content") or "") + compact(message.get("tool_calls", [])))
    return compact(
        {
            "id": "chatcmpl-" + ident(seed, 29),
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {**message, "refusal": None, "annotations": []},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": fingerprint,
        }
    )


def openai_call(recording, cache, session, kind, at, body, answer, finish, model_version, fingerprint):
    """One chat completion: `body` sent, `answer` (an assistant message) returned."""
    text = compact(body)
    rendered = openai_render(body)
    prompt = tokens(rendered)
    cached = cache.cached(rendered)
    created = int((recording.start + timedelta(seconds=at)).timestamp()) + 1
    seed = f"{recording.name}/{len(recording.entries)}"
    response = openai_response(seed, created, model_version, answer, finish, prompt, cached, fingerprint)
    recording.add(
        session,
        kind,
        at,
        OPENAI_URL,
        openai_headers(),
        text,
        200,
        response,
        response_headers=[
            ("openai-processing-ms", str(900 + len(recording.entries) * 137 % 700)),
            ("x-request-id", "req_" + ident(seed + "/request", 32, "0123456789abcdef")),
        ],
    )


def lc_system(text):
    """A LangChain SystemMessage as langchain-openai sends it (content first)."""
    return {"content": text, "role": "system"}


def lc_user(text, name=None):
    message = {"content": text, "role": "user"}
    if name:
        message["name"] = name
    return message


def lc_assistant(text):
    return {"content": text, "role": "assistant"}


# --- Anthropic Messages --------------------------------------------------------------------

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def without_marker(block):
    return {key: value for key, value in block.items() if key != "cache_control"}


def anthropic_segments(body):
    """The request's blocks in prompt order, each with whether it carries a breakpoint."""
    segments = []
    for tool in body.get("tools", []):
        segments.append((compact(without_marker(tool)), "cache_control" in tool))
    system = body.get("system", [])
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        segments.append((block["text"], "cache_control" in block))
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for position, block in enumerate(content):
            head = f"<|{message['role']}|>" if position == 0 else ""
            segments.append((head + compact(without_marker(block)), "cache_control" in block))
    return segments


def anthropic_message(seed, model, content, stop, usage_of):
    uncached, read, written = usage_of
    output = tokens(compact(content))
    return compact(
        {
            "id": "msg_01" + ident(seed, 22),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": uncached,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": written,
                    "ephemeral_1h_input_tokens": 0,
                },
                "output_tokens": output,
                "service_tier": "standard",
            },
        }
    )


ANTHROPIC_ERRORS = {
    529: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    500: {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
}


def anthropic_call(recording, cache, session, kind, at, text, answer=None, stop=None, status=200, retry=0):
    """One Messages request of body `text`: answered with `answer` (content blocks), or failed
    with `status` (no cache written)."""
    body = json.loads(text)
    seed = f"{recording.name}/{len(recording.entries)}"
    extra = [("request-id", "req_01" + ident(seed + "/request", 22))]
    if status == 200:
        usage_of = cache.usage(anthropic_segments(body))
        response = anthropic_message(seed, body["model"], answer, stop, usage_of)
    else:
        cache.usage(anthropic_segments(body), answered=False)
        response = compact(ANTHROPIC_ERRORS[status])
        extra.append(("x-should-retry", "true"))
    recording.add(
        session,
        kind,
        at,
        ANTHROPIC_URL,
        anthropic_headers(retry),
        text,
        status,
        response,
        response_headers=extra,
        wait=400 if status != 200 else 2200,
    )

