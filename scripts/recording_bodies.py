#!/usr/bin/env python3
"""The request bodies a recording holds, read with PyYAML and Python's json: the reference
`lint/tests/it/import.rs` compares `kvlint import` with.

Reads VCR cassettes (vcrpy / pytest-recording `interactions`, with a body string, a
`{string: …}` mapping, pydantic-ai's `parsed_body` or a `!!binary` body; go-vcr; Ruby's and
R's vcr `http_interactions`, Ruby's `!binary` tag; LangGraph's `.msgpack.zlib`), HAR files
(`log.entries`) and Inspect AI eval logs (`samples[].events[].call.request`).

    python scripts/recording_bodies.py FILE...

stdout: {"FILE": [{"index": i, "url": "...", "body": <the body parsed as JSON, or null>}]}
"""

import base64
import gzip
import json
import sys
import zlib

import yaml


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader, and Ruby's `!binary` (base64) as `!!binary` is read."""


Loader.add_constructor(
    "!binary", lambda loader, node: base64.b64decode("".join(loader.construct_scalar(node).split()))
)


def text_of(body):
    if isinstance(body, dict):
        body = body.get("string")
    if isinstance(body, bytes):
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        elif body[:1] == b"\x78":
            try:
                body = zlib.decompress(body)
            except zlib.error:
                pass
        body = body.decode("utf-8")
    return body


def parsed(text):
    try:
        return json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return None


def bodies(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8-sig")
    if path.endswith(".msgpack.zlib"):
        # LangGraph's docs cassettes: base64 of zlib of msgpack (AdvancedCompressedSerializer).
        import msgpack

        cassette = msgpack.unpackb(zlib.decompress(base64.b64decode(raw)), raw=False)
        return interactions_of(cassette)
    if text.lstrip().startswith("{") and "eval" in (log := json.loads(text)) and "samples" in log:
        # Inspect AI eval log: each model event's request, attachments resolved.
        found = []
        for sample in log["samples"]:
            attachments = sample.get("attachments") or {}

            def resolve(value):
                if isinstance(value, str) and value.startswith("attachment://"):
                    return attachments.get(value[len("attachment://"):], value)
                if isinstance(value, list):
                    return [resolve(item) for item in value]
                if isinstance(value, dict):
                    return {key: resolve(item) for key, item in value.items()}
                return value

            for event in sample.get("events") or []:
                if event.get("event") == "model":
                    request = (event.get("call") or {}).get("request")
                    found.append(
                        {"index": len(found), "url": event.get("model", ""), "body": resolve(request)}
                    )
        return found
    if text.lstrip().startswith("{"):
        entries = json.loads(text)["log"]["entries"]
        return [
            {
                "index": index,
                "url": entry["request"].get("url", ""),
                "body": parsed((entry["request"].get("postData") or {}).get("text")),
            }
            for index, entry in enumerate(entries)
        ]
    return interactions_of(yaml.load(text, Loader=Loader))


def interactions_of(cassette):
    interactions = cassette.get("http_interactions") or cassette.get("interactions") or []
    # vcrpy's own form (langchain's partner packages): two lists side by side.
    if not interactions and "requests" in cassette:
        interactions = [{"request": request} for request in cassette["requests"]]
    found = []
    for index, interaction in enumerate(interactions):
        request = interaction["request"]
        if "parsed_body" in request:
            body = request["parsed_body"]
        else:
            body = parsed(text_of(request.get("body")))
        found.append(
            {"index": index, "url": request.get("uri") or request.get("url") or "", "body": body}
        )
    return found


if __name__ == "__main__":
    json.dump({path: bodies(path) for path in sys.argv[1:]}, sys.stdout)
