#!/usr/bin/env python3
"""What SGLang prefills for recorded /v1/chat/completions bodies, computed by SGLang itself.

kvlint's engine-mode parity test (lint/tests/it/render_engines.rs) compares `kvlint render
--engine sglang` with this, turn by turn. Nothing here re-implements SGLang: each body goes
through the installed SGLang's own serving path, in process, without an engine:

  1. `ChatCompletionRequest.model_validate(body)` (sglang/srt/entrypoints/openai/protocol.py),
     the pydantic model FastAPI validates the HTTP body with;
  2. `OpenAIServingChat._validate_request` then `_convert_to_internal_request`
     (sglang/srt/entrypoints/openai/serving_chat.py), as `OpenAIServingBase.handle_request`
     calls them: `_process_messages` -> `_apply_jinja_template` (messages dumped, content
     processed for the template's content format, tools dumped, the template rendered by
     transformers' `apply_chat_template`, the text encoded);
  3. the template is loaded by SGLang's `TemplateManager`, as `--chat-template FILE` or, without
     one, the tokenizer's own (content format detected by SGLang).

Only the tokenizer manager (a process with queues to the scheduler) is stood in for: an object
holding the tokenizer SGLang's `get_tokenizer` loads and SGLang's own `ModelConfig` of the
model directory.

Run it with the venv of scripts/setup-sglang.sh:

    "$(scripts/setup-sglang.sh --python)" scripts/sglang_render.py INPUT.json > OUT.json

INPUT.json: {"model_dir": DIR, "cases": [{"id", "tokenizer_dir", "chat_template_file"?,
"body", "endpoint"?, "now"?}]} ("endpoint": "messages" for an Anthropic Messages body,
"responses" for a Responses body), as scripts/vllm_render.py takes it (no tool-call parser: the server runs
without `--tool-call-parser`, which changes no prompt). stdout: {"cases": [{"id", "text",
"token_ids", "tokenizer_json_ids"} | {"id", "error"}]}, "error" being SGLang's 400 message.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from engine_oracle import expand, pin_now, validation_error  # noqa: E402

DEFAULT_NOW = "2026-11-29T10:00:00"






class Servers:
    """One `OpenAIServingChat` per (tokenizer, template), as one `sglang serve` each."""

    def __init__(self, model_dir: str):
        from sglang.srt.runtime_context import publish
        from sglang.srt.server_args import ServerArgs

        self.model_dir = model_dir
        self.args = ServerArgs(model_path=model_dir, device="cpu", skip_server_warmup=True)
        publish(self.args, role="tokenizer")
        self.servers = {}
        self.tokenizer_jsons = {}

    def tokenizer_json(self, tokenizer_dir: str):
        from tokenizers import Tokenizer

        path = os.path.join(tokenizer_dir, "tokenizer.json")
        if path not in self.tokenizer_jsons:
            self.tokenizer_jsons[path] = Tokenizer.from_file(path)
        return self.tokenizer_jsons[path]

    def serving_chat(self, tokenizer_dir: str, template_file: str | None):
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
        from sglang.srt.parser.template_manager import TemplateManager
        from sglang.srt.runtime_context import get_context
        from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

        key = (tokenizer_dir, template_file)
        if key not in self.servers:
            # As `TokenizerManager.__init__` loads it for a text-only model.
            tokenizer = get_tokenizer(tokenizer_dir)
            manager = SimpleNamespace(
                tokenizer=tokenizer,
                processor=None,
                model_config=ModelConfig.from_server_args(self.args),
                server_args=self.args,
                model_path=self.model_dir,
                served_model_name=self.model_dir,
                config_value=lambda name: get_context().config_leaf(name),
            )
            templates = TemplateManager()
            templates.initialize_templates(manager, model_path=self.model_dir, chat_template=template_file)
            self.servers[key] = (OpenAIServingChat(manager, templates), tokenizer)
        return self.servers[key]




def render_case(servers: Servers, case: dict, seen: list) -> dict:
    from pydantic import ValidationError
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

    template = case.get("chat_template_file")
    tokenizer_dir = expand(case["tokenizer_dir"])
    chat, tokenizer = servers.serving_chat(tokenizer_dir, expand(template) if template else None)
    pin_now(case.get("now") or DEFAULT_NOW)
    if case.get("endpoint") == "responses":
        return render_responses(servers, case, tokenizer_dir, template, seen)
    try:
        if case.get("endpoint") == "messages":
            request = anthropic_chat_request(chat, case["body"])
        else:
            request = ChatCompletionRequest.model_validate(case["body"])
    except ValidationError as error:
        return {"error": validation_error(error)}
    except ValueError as error:  # the conversion's refusals, answered with 400
        return {"error": str(error)}
    error = chat._validate_request(request)
    if error:
        return {"error": error}
    seen.clear()
    try:
        adapted, _ = chat._convert_to_internal_request(request, None)
    except ValidationError as error:
        return {"error": validation_error(error)}
    except ValueError as error:  # handle_request answers these with 400
        return {"error": str(error)}
    token_ids = list(adapted.input_ids)
    text = seen[-1] if seen else tokenizer.decode(token_ids)
    return {
        "text": text,
        "token_ids": token_ids,
        "tokenizer_json_ids": servers.tokenizer_json(tokenizer_dir).encode(text, add_special_tokens=False).ids,
    }


def anthropic_chat_request(chat, body: dict):
    """The chat request SGLang's `/v1/messages` makes of an Anthropic Messages body
    (sglang/srt/entrypoints/anthropic/serving.py, `AnthropicServing.handle_messages`)."""
    from sglang.srt.entrypoints.anthropic.protocol import AnthropicMessagesRequest
    from sglang.srt.entrypoints.anthropic.serving import AnthropicServing

    request = AnthropicMessagesRequest.model_validate(body)
    return AnthropicServing(chat)._convert_to_chat_completion_request(request)


class _Rendered(BaseException):
    """Stops `create_responses` once its prompt is made (generation needs an engine)."""

    def __init__(self, prompt_ids):
        super().__init__()
        self.prompt_ids = prompt_ids


def render_responses(servers: Servers, case: dict, tokenizer_dir: str, template, seen: list) -> dict:
    """`OpenAIServingResponses.create_responses` (serving_responses.py) up to its prompt: the
    request's checks, then `_make_request`, whose result ends the call."""
    import asyncio

    from pydantic import ValidationError
    from sglang.srt.entrypoints.openai.protocol import ResponsesRequest
    from sglang.srt.entrypoints.openai.serving_responses import OpenAIServingResponses

    chat, tokenizer = servers.serving_chat(tokenizer_dir, expand(template) if template else None)
    responses = OpenAIServingResponses(chat.tokenizer_manager, chat.template_manager)
    make_request = responses._make_request

    async def made(*args, **kwargs):
        _messages, _prompts, _engine_prompts, processed = await make_request(*args, **kwargs)
        raise _Rendered(list(processed.prompt_ids))

    responses._make_request = made
    # The body is sent to the served model (SGLang refuses other names, and fails on none).
    body = {**case["body"], "model": chat.tokenizer_manager.served_model_name}
    try:
        request = ResponsesRequest.model_validate(body)
    except ValidationError as error:
        return {"error": validation_error(error)}
    seen.clear()
    try:
        answer = asyncio.run(responses.create_responses(request))
    except _Rendered as rendered:
        token_ids = rendered.prompt_ids
        text = seen[-1] if seen else tokenizer.decode(token_ids)
        return {
            "text": text,
            "token_ids": token_ids,
            "tokenizer_json_ids": servers.tokenizer_json(tokenizer_dir).encode(text, add_special_tokens=False).ids,
        }
    body = getattr(answer, "body", b"")
    try:
        return {"error": json.loads(body)["error"]["message"]}
    except Exception:
        return {"error": f"answered without a prompt: {body!r}"}


def _record_rendered_text(seen: list) -> None:
    """Keeps the text the template produced (`apply_chat_template(tokenize=False)`), followed
    by a continued assistant message's text when SGLang appends its tokens
    (`_append_assistant_prefix_to_prompt_ids`)."""
    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
    from transformers import PreTrainedTokenizerBase

    original = PreTrainedTokenizerBase.apply_chat_template

    def recording(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if kwargs.get("tokenize") is False and isinstance(result, str):
            seen.append(result)
        return result

    PreTrainedTokenizerBase.apply_chat_template = recording
    append_prefix = OpenAIServingChat._append_assistant_prefix_to_prompt_ids

    def appending(self, prompt_ids, assistant_prefix):
        if seen:
            seen[-1] += assistant_prefix
        return append_prefix(self, prompt_ids, assistant_prefix)

    OpenAIServingChat._append_assistant_prefix_to_prompt_ids = appending


def main(argv) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} INPUT.json|-", file=sys.stderr)
        return 2
    with sys.stdin if argv[1] == "-" else open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    real_stdout = sys.stdout
    results = []
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        servers = Servers(expand(doc["model_dir"]))
        seen: list = []
        _record_rendered_text(seen)
        for case in doc["cases"]:
            try:
                rendered = render_case(servers, case, seen)
            except Exception as error:  # a broken case (bad path, ...) must not hide the others
                rendered = {"error": f"oracle failure: {type(error).__name__}: {error}"}
            results.append({"id": case.get("id"), **rendered})
    real_stdout.write('{"cases": [\n')
    real_stdout.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in results))
    real_stdout.write("\n]}\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main(sys.argv))
