"""Guard every request of the ``anthropic`` client: an ``httpx2`` client for
``anthropic.Anthropic(http_client=...)`` whose request hook passes each Messages body
(``POST …/v1/messages``) to a :class:`~kvlint_cache.Guard` before it is sent.

    from anthropic import Anthropic
    from kvlint_cache import Guard
    from kvlint_cache.anthropic import guard_http_client

    client = Anthropic(http_client=guard_http_client(lambda: Guard(mode="error")))

anthropic 2.14 takes only an ``httpx2.Client`` (anthropic/_base_client.py,
``_reject_httpx_object`` and the ``isinstance(http_client, httpx2.Client)`` check in
``SyncAPIClient.__init__``), and wraps any exception from ``http_client.send`` that is not an
``AnthropicError`` into ``APIConnectionError`` (``SyncAPIClient._attempt_request``), which it
then retries (``SyncAPIClient._should_retry_exception`` walks ``__cause__`` looking for
``APIConnectionError``). So the hook raises the :class:`~kvlint_cache.GuardError` as an
instance of a subclass of both ``GuardError`` and ``anthropic.AnthropicError``: the SDK passes
it through unchanged and does not retry; ``except GuardError`` catches it, ``findings`` is kept.

Sessions are keyed by ``metadata.user_id``, then the ``x-kvlint-routing-key`` header
(``Conversation.routing_headers()``, passed as ``extra_headers``); see
:mod:`kvlint_cache.openai`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlint_cache._http import (
    ANTHROPIC_PATHS,
    GuardLike,
    GuardSessions,
    build_client,
    install_guard as _install_guard,
    unwrap_guard_error,
)

__all__ = [
    "ANTHROPIC_PATHS",
    "GuardSessions",
    "guard_async_http_client",
    "guard_http_client",
    "install_guard",
    "unwrap_guard_error",
]


def _anthropic_error() -> type | None:
    try:
        from anthropic import AnthropicError
    except ImportError:
        return None
    return AnthropicError


def guard_http_client(
    guard: GuardLike | GuardSessions | None = None,
    *,
    client_class: type | None = None,
    paths: Iterable[str] = ANTHROPIC_PATHS,
    **client_kwargs: Any,
) -> Any:
    """A sync ``httpx2.Client`` for ``anthropic.Anthropic(http_client=...)`` that guards
    every Messages request. Arguments as :func:`kvlint_cache.openai.guard_http_client`."""
    return build_client(guard, client_class, False, paths, _anthropic_error(), client_kwargs)


def guard_async_http_client(
    guard: GuardLike | GuardSessions | None = None,
    *,
    client_class: type | None = None,
    paths: Iterable[str] = ANTHROPIC_PATHS,
    **client_kwargs: Any,
) -> Any:
    """:func:`guard_http_client` for ``anthropic.AsyncAnthropic(http_client=...)``."""
    return build_client(guard, client_class, True, paths, _anthropic_error(), client_kwargs)


def install_guard(
    client: Any,
    guard: GuardLike | GuardSessions | None = None,
    *,
    paths: Iterable[str] = ANTHROPIC_PATHS,
) -> GuardSessions:
    """Add the guard's request hook to an existing client (sync or async); returns the
    sessions, also set as ``client.kvlint_guard``."""
    return _install_guard(client, guard, paths=paths, passthrough=_anthropic_error())
