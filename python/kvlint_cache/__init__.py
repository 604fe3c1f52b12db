"""kvlint-cache: assemble agent prompts that keep their cached prefix, and guard them at run time.

The engine is the native module :mod:`kvlint_cache._kvlint` (the Rust crates behind the
``kvlint`` command line, not a copy); this package re-exports it and adds the integrations:

- :mod:`kvlint_cache.openai` and :mod:`kvlint_cache.anthropic`: an ``httpx``/``httpx2`` client
  whose request hook passes every request body to a :class:`Guard`;
- :mod:`kvlint_cache.langgraph`: a ``pre_model_hook`` that builds the model input with a
  :class:`Conversation`;
- :mod:`kvlint_cache.agents`: a ``call_model_input_filter`` for the OpenAI Agents SDK;
- :mod:`kvlint_cache.pytest_plugin`: the ``kvlint_guard`` fixture and the
  ``kvlint_prefix_stable`` marker (registered as the pytest plugin ``kvlint``).

Not to be confused with the unrelated PyPI distribution ``kvlint`` (import name ``kvlint``),
an offline request-log analyzer for vLLM/SGLang; this distribution is ``kvlint-cache``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from kvlint_cache import _kvlint
from kvlint_cache._kvlint import (
    ROUTING_KEY_HEADER,
    SUMMARY_SESSION_KEY,
    CacheWarning,
    Conversation,
    ConversationError,
    Finding,
    Guard,
    GuardError,
    Outcome,
    Report,
    TierChange,
    check,
    run_cli,
)

try:  # the installed distribution's version (maturin takes it from the crate's Cargo.toml)
    __version__: str = _version("kvlint-cache")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = getattr(_kvlint, "__version__", "0+unknown")

__all__ = [
    "ROUTING_KEY_HEADER",
    "SUMMARY_SESSION_KEY",
    "CacheWarning",
    "Conversation",
    "ConversationError",
    "Finding",
    "Guard",
    "GuardError",
    "Outcome",
    "Report",
    "TierChange",
    "__version__",
    "check",
    "run_cli",
]
