"""`kvlint proxy` (the wheel's `kvlint` command) in front of llama-server, with the real
`openai` and `anthropic` clients pointed at it, streaming and not: answers pass through, and
each client's session is recorded as `{request, response}` lines that `kvlint check` reads.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import anthropic
import openai
import pytest
from conftest import MODEL

from kvlint_cache import Conversation


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def proxy(llama_server, tmp_path):
    kvlint = Path(sys.executable).with_name("kvlint")
    port, metrics_port = free_port(), free_port()
    record = tmp_path / "sessions"
    process = subprocess.Popen(
        [kvlint, "proxy", "--listen", f"127.0.0.1:{port}", "--upstream", llama_server.url,
         "--record", str(record), "--metrics", f"127.0.0.1:{metrics_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail("kvlint proxy did not start")
        time.sleep(0.1)

    class Proxy:
        pass

    running = Proxy()
    running.url, running.record = url, record
    running.metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    yield running
    process.terminate()
    process.wait(timeout=10)


def counter(metrics_url: str, name: str, label: str = "") -> float:
    with urllib.request.urlopen(metrics_url) as answer:
        text = answer.read().decode()
    lines = (line for line in text.splitlines() if line.startswith(name) and label in line)
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


def wait_for(metrics_url: str, requests: int) -> None:
    deadline = time.monotonic() + 30
    while counter(metrics_url, "kvlint_requests_total") < requests and time.monotonic() < deadline:
        time.sleep(0.1)


def test_the_openai_client_streaming_and_not_is_recorded_turn_by_turn(proxy):
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="none", max_retries=0)
    conversation = Conversation()
    conversation.add_static("You are a terse assistant.")
    conversation.push_user("hi")
    for turn in range(4):
        body = conversation.to_openai_chat(MODEL)
        if turn % 2:
            chunks = list(client.chat.completions.create(**body, max_tokens=4, stream=True))
            text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        else:
            text = client.chat.completions.create(**body, max_tokens=4).choices[0].message.content
        conversation.push_assistant(text or "ok")
        conversation.push_user(f"and then {turn}?")
    wait_for(proxy.metrics, 4)
    (recorded,) = proxy.record.iterdir()
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert len(lines) == 4
    assert all(set(line) >= {"request", "response"} for line in lines)
    assert counter(proxy.metrics, "kvlint_findings_total") == 0
    checked = subprocess.run(
        [Path(sys.executable).with_name("kvlint"), "check", str(recorded)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_anthropic_client_streaming_and_not_passes_through(proxy):
    client = anthropic.Anthropic(base_url=proxy.url, api_key="none", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    answer = client.messages.create(model=MODEL, max_tokens=4, system="Be terse.", messages=messages)
    assert answer.content and answer.usage.input_tokens >= 0
    messages += [{"role": "assistant", "content": answer.content[0].text or "ok"},
                 {"role": "user", "content": "more"}]
    with client.messages.stream(model=MODEL, max_tokens=4, system="Be terse.", messages=messages) as stream:
        streamed = stream.get_final_message()
    served = streamed.usage.cache_read_input_tokens
    assert served > 0, "the second turn is served from cache"
    wait_for(proxy.metrics, 2)
    assert counter(proxy.metrics, "kvlint_prompt_tokens_cached_total") >= served
    # The Messages bodies predicted in the chat shape llama-server turns them into, with the
    # answer the slot keeps after the first prompt. The tiny random model's answer need not be
    # the tokenizer's own split of its text: then the engine serves the prompt and less of the
    # answer than predicted, and exactly that shortfall is lost, as `answer_retokenized`.
    predicted = counter(proxy.metrics, "kvlint_prompt_tokens_predicted_cached_total")
    lost = counter(proxy.metrics, "kvlint_prompt_tokens_lost_total")
    retokenized = counter(proxy.metrics, "kvlint_prompt_tokens_lost_total", 'cause="answer_retokenized"')
    assert served <= predicted
    assert lost == retokenized == predicted - served, (predicted, served, lost, retokenized)
