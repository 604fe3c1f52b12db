"""Helpers the engine oracles share (scripts/vllm_render.py, scripts/sglang_render.py): each
runs in its engine's venv and imports this file from beside it."""

import datetime as _dt
import os


def expand(p: str) -> str:
    """A path with `~` and variables expanded, made absolute."""
    return os.path.abspath(os.path.expandvars(os.path.expanduser(p)))


def pin_now(now_iso: str) -> None:
    """Pins what transformers' `strftime_now` sees: it reads `datetime.now()` from
    chat_template_utils' globals at call time (see scripts/reference_render.py)."""
    import transformers.utils.chat_template_utils as ctu

    now = _dt.datetime.fromisoformat(now_iso)

    class FrozenDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return now if tz is None else now.replace(tzinfo=tz)

    ctu.datetime = FrozenDatetime


def validation_error(error) -> str:
    """FastAPI answers a pydantic error with 400 and the errors list: its first reason."""
    try:
        first = error.errors()[0]
        place = ".".join(str(part) for part in first.get("loc", ()))
        return f"{first.get('msg')} at {place}" if place else str(first.get("msg"))
    except Exception:
        return str(error)
