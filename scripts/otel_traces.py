#!/usr/bin/env python3
"""Record real OpenTelemetry traces of a short agent conversation, as OTLP JSON.

A deterministic agent loop drives the real `openai` Python client (chat.completions, model
"tiny", temperature 0, a few tokens) against an OpenAI-compatible server (the tests' tiny
llama-server), with the client instrumented by one of:

  genai          opentelemetry-instrumentation-openai-v2, latest experimental GenAI semantic
                 conventions, message content captured on spans (`gen_ai.input.messages`, ...)
  genai-legacy   the same package in its default mode (content capture set to `true`, no
                 semconv opt-in): whatever that version records
  openinference  openinference-instrumentation-openai (`llm.input_messages.N.message.*`,
                 `llm.tools.N.tool.json_schema`, `input.value`, ...)

The conversation: a system prompt with a clock line, two function tools, a user message, then
three more turns, each appending the assistant reply (with a synthetic tool call when the model
made none), a fake tool result and a new user message; the clock line ticks on the 3rd turn (a
cache-breaking system-prompt edit); one side call (a title generation with its own system
prompt) runs between turns 2 and 3. All chat spans are children of one agent span.

Outputs:
  --out TRACE.json   the collected spans as ONE OTLP ExportTraceServiceRequest in OTLP JSON
                     (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): hex
                     trace/span ids, integer enums, lowerCamelCase keys; pretty-printed, or one
                     line with --jsonl (the collector file exporter's format)
  --sent SENT.jsonl  every request body exactly as sent on the wire, one per line (ground truth)

Usage:
  python scripts/otel_traces.py --base-url http://127.0.0.1:PORT/v1 \\
      --instrumentation {genai,genai-legacy,openinference} --out TRACE.json --sent SENT.jsonl
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import sys

MODES = ("genai", "genai-legacy", "openinference")

# Environment each mode runs under, set before the instrumentor reads it (it reads it once, in
# `instrument()`). Keys mapped to None are removed.
MODE_ENV = {
    "genai": {
        # Read by opentelemetry-util-genai / -instrumentation-openai-v2.
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
        "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": None,
        "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": None,
    },
    "genai-legacy": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": None,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": None,
        "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": None,
    },
    "openinference": {
        # The defaults, spelled out: nothing hidden, OpenInference attributes only.
        "OPENINFERENCE_HIDE_INPUTS": "false",
        "OPENINFERENCE_HIDE_INPUT_MESSAGES": "false",
        "OPENINFERENCE_HIDE_INPUT_TEXT": "false",
        "OPENINFERENCE_HIDE_LLM_TOOLS": "false",
        "OPENINFERENCE_HIDE_LLM_INVOCATION_PARAMETERS": "false",
        "OPENINFERENCE_ENABLE_GENAI_SEMCONV": "false",
    },
}

MODEL = "tiny"
MAX_TOKENS = 8

SYSTEM = (
    "You are Skyline, a travel assistant. Answer briefly and use the tools when a "
    "question needs live data.\nCurrent time: {time}"
)
TITLE_SYSTEM = "Write a title of at most five words for the conversation. Reply with the title only."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Search direct flights between two airports on a date.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "description": "IATA code"},
                    "destination": {"type": "string", "description": "IATA code"},
                    "date": {"type": "string", "format": "date"},
                },
                "required": ["origin", "destination", "date"],
            },
        },
    },
]

# (user message, clock, synthetic tool call used when the model makes none, fake tool result)
TURNS = [
    (
        "What's the weather in Paris right now?",
        "10:00:01",
        ("get_weather", '{"city": "Paris", "unit": "celsius"}'),
        '{"city": "Paris", "temperature": 18, "condition": "cloudy"}',
    ),
    (
        "And are there direct flights from CDG to Lisbon tomorrow?",
        "10:00:01",
        ("search_flights", '{"origin": "CDG", "destination": "LIS", "date": "2025-06-02"}'),
        '[{"flight": "TP441", "departs": "07:25"}, {"flight": "AF1024", "departs": "12:10"}]',
    ),
    (
        "How warm is it in Lisbon?",
        "10:00:02",  # the clock ticks: the system prompt changes on the 3rd turn
        ("get_weather", '{"city": "Lisbon", "unit": "celsius"}'),
        '{"city": "Lisbon", "temperature": 24, "condition": "sunny"}',
    ),
    ("Great, thanks. Summarize the plan in one line.", "10:00:02", None, None),
]


class SeededIds:
    """Deterministic trace/span ids (an `IdGenerator`), so reruns differ only in timestamps."""

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1

    def is_trace_id_random(self) -> bool:
        return True


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--instrumentation", required=True, choices=MODES)
    parser.add_argument("--out", required=True, help="OTLP JSON file to write")
    parser.add_argument("--sent", help="JSONL file of the request bodies as sent")
    parser.add_argument(
        "--jsonl", action="store_true", help="write --out as one line (collector file exporter)"
    )
    return parser.parse_args(argv)


def set_environment(mode: str) -> None:
    for key, value in MODE_ENV[mode].items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def instrument(mode: str, tracer_provider) -> None:
    if mode == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)


def run_conversation(client, tracer, mode: str) -> None:
    """The agent loop: 4 main-thread calls and one side call, all under one agent span."""
    if mode == "openinference":
        agent_attributes = {"openinference.span.kind": "AGENT", "agent.name": "skyline"}
    else:
        agent_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "skyline"}
    agent_name = "invoke_agent skyline" if mode != "openinference" else "skyline"

    def chat(messages, tools=None):
        kwargs = {"model": MODEL, "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0}
        if tools:
            kwargs["tools"] = tools
        return client.chat.completions.create(**kwargs).choices[0].message

    with tracer.start_as_current_span(agent_name, attributes=agent_attributes):
        messages = [{"role": "system", "content": SYSTEM.format(time=TURNS[0][1])}]
        call_number = 0
        for turn, (user, clock, synthetic_call, tool_result) in enumerate(TURNS, start=1):
            messages[0] = {"role": "system", "content": SYSTEM.format(time=clock)}
            messages.append({"role": "user", "content": user})
            if turn == 3:
                # Side call between turns 2 and 3: a title for the conversation so far.
                chat(
                    [
                        {"role": "system", "content": TITLE_SYSTEM},
                        {"role": "user", "content": TURNS[0][0]},
                    ]
                )
            reply = chat(messages, TOOLS)
            assistant = {"role": "assistant", "content": reply.content}
            calls = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in (reply.tool_calls or [])
                if getattr(call, "function", None) is not None
            ]
            if not calls and synthetic_call is not None:
                call_number += 1
                name, arguments = synthetic_call
                calls = [
                    {
                        "id": f"call_{call_number:03d}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            if calls:
                assistant["tool_calls"] = calls
            messages.append(assistant)
            for call in calls:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": tool_result if tool_result is not None else '{"ok": true}',
                    }
                )


# --- OTLP JSON ------------------------------------------------------------------------------

ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def fix_ids(value):
    """MessageToDict writes bytes as base64; OTLP JSON wants trace/span ids as lowercase hex."""
    if isinstance(value, dict):
        return {
            key: (
                base64.b64decode(item).hex() if key in ID_KEYS and isinstance(item, str) else fix_ids(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [fix_ids(item) for item in value]
    return value


def otlp_json(spans) -> dict:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = sorted(spans, key=lambda span: (span.start_time or 0, span.context.span_id))
    request = encode_spans(spans)
    # lowerCamelCase keys (the default), enums as integers; int64 stay decimal strings (the
    # proto3 JSON mapping, which OTLP JSON follows and the collector writes).
    document = MessageToDict(request, use_integers_for_enums=True)
    return fix_ids(document)


def main(argv=None) -> int:
    args = parse_args(argv)
    set_environment(args.instrumentation)

    import httpx
    import openai
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "kvlint-otel-traces"}),
        id_generator=SeededIds(MODES.index(args.instrumentation) + 1),
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(args.instrumentation, provider)

    sent = []

    def on_request(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path.endswith("/chat/completions"):
            sent.append(request.read())

    client = openai.OpenAI(
        base_url=args.base_url,
        api_key="none",
        max_retries=0,
        http_client=httpx.Client(event_hooks={"request": [on_request]}),
    )
    run_conversation(client, provider.get_tracer("kvlint.otel_traces"), args.instrumentation)
    provider.force_flush()

    document = otlp_json(exporter.get_finished_spans())
    with open(args.out, "w", encoding="utf-8") as out:
        if args.jsonl:
            out.write(json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
        else:
            out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    if args.sent:
        with open(args.sent, "wb") as out:
            for body in sent:
                if b"\n" in body:  # keep one body per line; never expected from `openai`
                    body = json.dumps(json.loads(body), ensure_ascii=False).encode()
                out.write(body + b"\n")
    spans = sum(
        len(scope.get("spans", []))
        for resource in document.get("resourceSpans", [])
        for scope in resource.get("scopeSpans", [])
    )
    print(f"{args.instrumentation}: {len(sent)} requests, {spans} spans -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
