#!/usr/bin/env python3
"""What vLLM prefills for recorded /v1/chat/completions bodies, computed by vLLM itself.

kvlint's engine-mode parity test (lint/tests/it/render_engines.rs) compares `kvlint render
--engine vllm` with this, turn by turn. Nothing here re-implements vLLM: each body goes
through the installed vLLM's own serving path, in process, without an engine:

  1. `ChatCompletionRequest.model_validate(body)`: the pydantic model FastAPI validates the
     HTTP body with (vllm/entrypoints/openai/chat_completion/api_router.py).
  2. `OnlineRenderer.render_chat(request)` (vllm/renderers/online_renderer.py): tool dicts
     from `tool.model_dump()`, then `preprocess_chat` -> `HfRenderer.render_messages_async`
     (vllm/renderers/hf.py: content-format detection, `parse_chat_messages`, then
     `safe_apply_chat_template`) -> tokenization with `add_special_tokens=False`.

The server modelled: `--chat-template FILE` (or the tokenizer's own template), content
format `auto`, `--enable-auto-tool-choice` with a tool-call parser, no multimodal inputs.

Run it with the venv of scripts/setup-vllm.sh:

    "$(scripts/setup-vllm.sh --python)" scripts/vllm_render.py INPUT.json > OUT.json

INPUT.json (use "-" for stdin):
    {"model_dir": "DIR",                      # an HF model config (the tiny model of
                                              # setup-vllm.sh); only its config is read
     "cases": [{
        "id": "any JSON value",
        "tokenizer_dir": "DIR",               # tokenizer.json + tokenizer_config.json
        "chat_template_file": "X.jinja",      # optional: as `--chat-template`; without it
                                              # the tokenizer config's own template
        "tool_call_parser": "hermes",         # optional: as `--tool-call-parser`
        "body": {...},                        # the /v1/chat/completions request body
        "endpoint": "messages",               # optional: the body is sent to /v1/messages
                                              # ("responses": to /v1/responses)
        "now": "2026-11-29T10:00:00",         # what strftime_now() sees; optional
        "model_type": "gpt_oss"               # optional: serve a gpt-oss model (vLLM then
                                              # renders through Harmony, its system message
                                              # dated by VLLM_SYSTEM_START_DATE = now's date)
    }],
     "templates": ["X.jinja", ...]}            # optional: templates to read facts from

stdout: {"cases": [{"id": ..., "text": "...", "token_ids": [...], "tokenizer_json_ids": [...]}
                   | {"id": ..., "error": "..."}]}
where "error" is the reason vLLM refuses the request (its 400 message), and
"tokenizer_json_ids" the same text encoded by the tokenizer.json itself (the `tokenizers`
library): the transformers vLLM pins may load a tokenizer as another class that does not
tokenize as its tokenizer.json does (5.19 turns DeepSeek-V3's into a `LlamaTokenizer` with a
Metaspace pre-tokenizer, which drops spaces).

and, for "templates", {"templates": [{"path": ..., "content_format": "string" | "openai",
"developer_role": bool}]}: how vLLM hands message content to each template
(`_detect_content_format`) and whether it keeps developer messages
(`_detect_developer_role_support`).

With KVLINT_VLLM_DEBUG=1 each case also carries "conversation" and "tools": what vLLM hands
the chat template. Fully offline; nothing but the JSON document is written to stdout.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
# Recorded prompts can be longer than the tiny model's context; length is no parsing matter.
os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from engine_oracle import expand, pin_now, validation_error  # noqa: E402

DEFAULT_NOW = "2026-11-29T10:00:00"
DEBUG = os.environ.get("KVLINT_VLLM_DEBUG") == "1"






class Servers:
    """One OnlineRenderer per (tokenizer, template, tool parser), as one `vllm serve` each."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self.configs = {}
        self.renderers = {}
        self.tokenizer_jsons = {}

    def tokenizer_json(self, tokenizer_dir: str):
        from tokenizers import Tokenizer

        path = os.path.join(expand(tokenizer_dir), "tokenizer.json")
        if path not in self.tokenizer_jsons:
            self.tokenizer_jsons[path] = Tokenizer.from_file(path)
        return self.tokenizer_jsons[path]

    def gpt_oss_dir(self) -> str:
        """A gpt-oss model config (no weights: only the config is read), made once."""
        import tempfile

        from transformers import GptOssConfig

        if not hasattr(self, "_gpt_oss_dir"):
            self._gpt_oss_dir = tempfile.mkdtemp(prefix="kvlint-gpt-oss-")
            GptOssConfig(
                architectures=["GptOssForCausalLM"],
                num_hidden_layers=1,
                hidden_size=64,
                intermediate_size=64,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=32,
                num_local_experts=2,
                num_experts_per_tok=1,
                vocab_size=201088,
            ).save_pretrained(self._gpt_oss_dir)
        return self._gpt_oss_dir

    def online_renderer(
        self,
        tokenizer_dir: str,
        template_file: str | None,
        tool_parser: str | None,
        model_type: str | None = None,
    ):
        from vllm.engine.arg_utils import EngineArgs
        from vllm.renderers.chat_utils import load_chat_template
        from vllm.renderers.online_renderer import OnlineRenderer
        from vllm.renderers.registry import renderer_from_config

        key = (tokenizer_dir, template_file, tool_parser, model_type)
        if key in self.renderers:
            return self.renderers[key]
        model_dir = self.gpt_oss_dir() if model_type == "gpt_oss" else self.model_dir
        if (tokenizer_dir, model_dir) not in self.configs:
            args = EngineArgs(
                model=model_dir,
                tokenizer=tokenizer_dir,
                max_model_len=1 << 20,
                enforce_eager=True,
            )
            vllm_config = args.create_engine_config()
            self.configs[(tokenizer_dir, model_dir)] = (
                vllm_config,
                renderer_from_config(vllm_config),
            )
        vllm_config, renderer = self.configs[(tokenizer_dir, model_dir)]
        online = OnlineRenderer(
            model_config=vllm_config.model_config,
            renderer=renderer,
            request_logger=None,
            chat_template=load_chat_template(template_file),
            chat_template_content_format="auto",
            enable_auto_tools=True,
            tool_parser=tool_parser,
        )
        self.renderers[key] = online
        return online


def _added_special_tokens(tokenizer) -> tuple[str, str]:
    """The text of the special tokens the tokenizer adds before and after an encoded text."""
    with_special = tokenizer.encode("a", add_special_tokens=True)
    without = tokenizer.encode("a", add_special_tokens=False)
    for start in range(len(with_special) - len(without) + 1):
        if with_special[start : start + len(without)] == without:
            end = start + len(without)
            return tokenizer.decode(with_special[:start]), tokenizer.decode(with_special[end:])
    return "", ""


def _error_text(error) -> str:
    message = getattr(error, "error", None)
    if message is not None and hasattr(message, "message"):
        return message.message
    return f"{type(error).__name__}: {error}"




async def render_case(servers: Servers, case: dict, seen: list) -> dict:
    from pydantic import ValidationError
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.serve.engine.protocol import ErrorResponse

    template = case.get("chat_template_file")
    online = servers.online_renderer(
        expand(case["tokenizer_dir"]),
        expand(template) if template else None,
        case.get("tool_call_parser"),
        case.get("model_type"),
    )
    pin_now(case.get("now") or DEFAULT_NOW)
    # Harmony's system message is dated `VLLM_SYSTEM_START_DATE`, read at each request.
    os.environ["VLLM_SYSTEM_START_DATE"] = (case.get("now") or DEFAULT_NOW)[:10]
    try:
        if case.get("endpoint") == "messages":
            request = anthropic_chat_request(online, case["body"])
        elif case.get("endpoint") == "responses":
            from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

            request = ResponsesRequest.model_validate(case["body"])
        else:
            request = ChatCompletionRequest.model_validate(case["body"])
    except ValidationError as error:
        return {"error": validation_error(error)}
    except Exception as error:  # the request's model validators raise vLLM's own errors
        return {"error": _error_text(error)}
    seen.clear()
    try:
        if case.get("endpoint") == "responses":
            # `OpenAIServingResponses._render_resolved_response_inputs` without a previous
            # response.
            result = await online.render_responses(request)
        else:
            result = await online.render_chat(request)
    except ValidationError as error:
        return {"error": validation_error(error)}
    except Exception as error:  # vLLM answers these with 400 (or 500): refused either way
        return {"error": _error_text(error)}
    if isinstance(result, ErrorResponse):
        return {"error": _error_text(result)}
    if case.get("endpoint") == "responses":
        engine_inputs = [result.engine_input]
    else:
        _conversation, engine_inputs = result
    token_ids = list(engine_inputs[0]["prompt_token_ids"])
    tokenizer = online.renderer.get_tokenizer()
    text = seen[0]["text"] if seen else tokenizer.decode(token_ids)
    if case.get("endpoint") == "responses":
        # The Responses path encodes with `add_special_tokens=True` (`TokenizeParams`'
        # default): the prompt vLLM prefills starts (and ends) with the special tokens the
        # tokenizer adds, which the template's text does not show.
        before, after = _added_special_tokens(tokenizer)
        text = before + text + after
    rendered = {
        "text": text,
        "token_ids": token_ids,
        "tokenizer_json_ids": servers.tokenizer_json(case["tokenizer_dir"]).encode(text, add_special_tokens=False).ids,
    }
    if DEBUG and seen:
        rendered["conversation"] = seen[0]["conversation"]
        rendered["tools"] = seen[0]["tools"]
    return rendered


def anthropic_chat_request(online, body: dict):
    """The chat request vLLM's `/v1/messages` makes of an Anthropic Messages body
    (vllm/entrypoints/anthropic/serving.py, `AnthropicServingMessages.create_messages`)."""
    from vllm.entrypoints.anthropic.protocol import AnthropicMessagesRequest
    from vllm.entrypoints.anthropic.serving import AnthropicServingMessages

    request = AnthropicMessagesRequest.model_validate(body)
    # As `AnthropicServingMessages.__init__` decides it for this server's template. A disabled
    # thinking takes "none", the effort vLLM's probe finds for templates that honor it.
    merge = AnthropicServingMessages._should_merge_inline_system(online)
    return AnthropicServingMessages.to_chat_completion_request(request, merge_inline_system=merge)


def _record_template_inputs(seen: list) -> None:
    """Keeps the text the template produced (and, for debugging, what it was given)."""
    import vllm.renderers.hf as hf

    original = hf.safe_apply_chat_template

    def recording(model_config, tokenizer, conversation, **kwargs):
        text = original(model_config, tokenizer, conversation, **kwargs)
        seen.append(
            {
                "text": text,
                "conversation": json.loads(json.dumps(conversation, default=str)),
                "tools": json.loads(json.dumps(kwargs.get("tools"), default=str)),
            }
        )
        return text

    hf.safe_apply_chat_template = recording


def template_facts(paths: list) -> list:
    from vllm.renderers.hf import _detect_content_format, _detect_developer_role_support

    facts = []
    for path in paths:
        with open(expand(path), encoding="utf-8") as f:
            source = f.read()
        facts.append(
            {
                "path": path,
                "content_format": _detect_content_format(source, default="string"),
                "developer_role": _detect_developer_role_support(source),
            }
        )
    return facts


async def run(doc: dict) -> list:
    servers = Servers(expand(doc["model_dir"]))
    seen: list = []
    _record_template_inputs(seen)
    results = []
    for case in doc["cases"]:
        try:
            rendered = await render_case(servers, case, seen)
        except Exception as error:  # a broken case (bad path, ...) must not hide the others
            rendered = {"error": f"oracle failure: {type(error).__name__}: {error}"}
        results.append({"id": case.get("id"), **rendered})
    return results


def main(argv) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} INPUT.json|-", file=sys.stderr)
        return 2
    with sys.stdin if argv[1] == "-" else open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        results = asyncio.run(run(doc))
        facts = template_facts(doc.get("templates") or [])
    real_stdout.write('{"templates": ' + json.dumps(facts) + ',\n"cases": [\n')
    real_stdout.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in results))
    real_stdout.write("\n]}\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main(sys.argv))
