#!/usr/bin/env python3
"""Reference chat-template renderings made with the real HuggingFace `transformers`.

kvlint's Rust tests use this to check that kvlint renders chat templates (and
tokenizes the result) exactly as transformers does.

Run it with the venv made by scripts/setup-python.sh:

    ~/.cache/kvlint/venv/bin/python scripts/reference_render.py INPUT.json > OUT.json

INPUT.json (use "-" for stdin):
    {"cases": [{
        "id": "any JSON value",
        "tokenizer_dir": "DIR",              # has tokenizer.json + tokenizer_config.json
        "chat_template_file": "X.jinja",     # optional; overrides the config's template
        "chat_template_name": "tool_use",    # optional; picks a named template when the
                                             # config's chat_template is a list of {name, template}
        "messages": [...],
        "tools": [...] | null,
        "add_generation_prompt": false,
        "kwargs": {...},                     # extra template variables (enable_thinking, ...)
        "now": "2026-11-29T10:00:00",        # what strftime_now() sees; optional
        "allow_list_mutation": false         # optional; lets the template change lists in place
                                             # (`ns.ids.append(x)`), as plain Jinja2 and llama.cpp
                                             # do and transformers' immutable sandbox does not
    }]}

stdout: {"cases": [{"id": ..., "text": "...", "ids": [...]} | {"id": ..., "error": "Type: msg"}]}
where ids = tokenizer(text, add_special_tokens=False)["input_ids"].

Paths may use ~ and $VARS. Fully offline (HF_HUB_OFFLINE=1); nothing but the JSON document is written to stdout.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import contextlib  # noqa: E402
import datetime as _dt  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

DEFAULT_NOW = "2026-11-29T10:00:00"


def _frozen_datetime(now: _dt.datetime):
    """A datetime subclass whose now()/today()/utcnow() return the pinned instant."""

    class FrozenDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            if tz is None:
                return now
            if now.tzinfo is None:
                return now.replace(tzinfo=tz)
            return now.astimezone(tz)

        @classmethod
        def today(cls):
            return now if now.tzinfo is None else now.replace(tzinfo=None)

        @classmethod
        def utcnow(cls):
            return now if now.tzinfo is None else now.astimezone(_dt.timezone.utc).replace(tzinfo=None)

    return FrozenDatetime


def _pin_now(ctu, now_iso: str) -> None:
    # transformers/utils/chat_template_utils.py does `from datetime import datetime` and defines,
    # inside the (lru_cached) template compiler,
    #     def strftime_now(format): return datetime.now().strftime(format)
    # `datetime` is looked up in the module's globals at *call* time, so rebinding the module
    # attribute pins the clock for every template, including already-compiled ones.
    ctu.datetime = _frozen_datetime(_dt.datetime.fromisoformat(now_iso))


@contextlib.contextmanager
def _list_mutation(allowed: bool):
    """transformers renders in Jinja2's ImmutableSandboxedEnvironment, which refuses methods that
    change a list; the plain SandboxedEnvironment allows them. The check is looked up on the class
    at call time, so swapping it also covers templates compiled (and cached) earlier."""
    if not allowed:
        yield
        return
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

    immutable_check = ImmutableSandboxedEnvironment.is_safe_attribute
    ImmutableSandboxedEnvironment.is_safe_attribute = SandboxedEnvironment.is_safe_attribute
    try:
        yield
    finally:
        ImmutableSandboxedEnvironment.is_safe_attribute = immutable_check


def _path(p: str) -> str:
    # "~" and $VARS (e.g. $KVLINT_ASSETS) are expanded; relative paths are relative to the cwd.
    return os.path.expandvars(os.path.expanduser(p))


def main(argv) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} INPUT.json|-", file=sys.stderr)
        return 2
    with (sys.stdin if argv[1] == "-" else open(argv[1], encoding="utf-8")) as f:
        doc = json.load(f)

    real_stdout = sys.stdout
    results = []
    # Anything a library prints goes to stderr; stdout carries only our JSON.
    with contextlib.redirect_stdout(sys.stderr):
        import transformers.utils.chat_template_utils as ctu
        from transformers import AutoTokenizer

        if not (isinstance(getattr(ctu, "datetime", None), type) and issubclass(ctu.datetime, _dt.datetime)):
            raise SystemExit(
                "reference_render: transformers' chat_template_utils no longer has a module-level "
                "`datetime`; update _pin_now() to the new way strftime_now reads the clock"
            )

        tokenizers = {}
        for case in doc["cases"]:
            cid = case.get("id")
            try:
                tdir = os.path.abspath(_path(case["tokenizer_dir"]))
                tok = tokenizers.get(tdir)
                if tok is None:
                    if not os.path.isfile(os.path.join(tdir, "tokenizer.json")):
                        raise FileNotFoundError(f"no tokenizer.json in {tdir} (run scripts/fetch-assets.sh?)")
                    tok = tokenizers[tdir] = AutoTokenizer.from_pretrained(tdir, local_files_only=True)

                chat_template = None
                if case.get("chat_template_file"):
                    with open(_path(case["chat_template_file"]), encoding="utf-8") as tf:
                        chat_template = tf.read()
                elif case.get("chat_template_name"):
                    chat_template = case["chat_template_name"]

                _pin_now(ctu, case.get("now") or DEFAULT_NOW)
                with _list_mutation(bool(case.get("allow_list_mutation", False))):
                    text = tok.apply_chat_template(
                        case["messages"],
                        tools=case.get("tools"),
                        chat_template=chat_template,
                        add_generation_prompt=bool(case.get("add_generation_prompt", False)),
                        tokenize=False,
                        **(case.get("kwargs") or {}),
                    )
                ids = tok(text, add_special_tokens=False)["input_ids"]
                results.append({"id": cid, "text": text, "ids": list(ids)})
            except Exception as e:  # per-case: report and carry on
                results.append({"id": cid, "error": f"{type(e).__name__}: {e}"})

    # One case per line: valid JSON, and readable / diffable when checked in as a fixture.
    real_stdout.write('{"cases": [\n')
    real_stdout.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in results))
    real_stdout.write("\n]}\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main(sys.argv))
