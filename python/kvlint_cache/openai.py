"""Guard every request of the ``openai`` client: an ``httpx2``/``httpx`` client for
``openai.OpenAI(http_client=...)`` whose request hook passes each Chat Completions and
Responses body to a :class:`~kvlint_cache.Guard` before it is sent.

    from openai import OpenAI
    from kvlint_cache import Guard
    from kvlint_cache.openai import guard_http_client

    client = OpenAI(http_client=guard_http_client(lambda: Guard(mode="error")))

How it reaches the caller (openai 3.57, openai/_base_client.py, ``SyncAPIClient.request``):
the SDK catches only ``httpx2.TimeoutException``, ``OpenAIError`` and ``request_exceptions()``
(openai/_httpx2.py: ``httpx2.RequestError``, ``ssl.SSLError``, ``anyio.EndOfStream`` and the
legacy ``httpx.RequestError``) around ``_send_request``. A :class:`~kvlint_cache.GuardError`
raised by the hook is none of these: it reaches the caller unchanged, and is not retried.
``openai.OpenAI`` accepts an ``httpx2.Client`` or a legacy ``httpx.Client``
(``SyncAPIClient.__init__``: ``is_httpx2_sync_client`` / ``is_legacy_httpx_sync_client``).

Sessions: ``guard`` is one Guard for every request, or a factory called once per session,
told apart as a recording's requests are grouped: by the key the body carries
(:func:`kvlint_cache._http.session_key`: a per-user id such as ``metadata.user_id``, ``user``,
``safety_identifier``, else the prefix key ``prompt_cache_key``, which
``Conversation.to_openai_chat`` sets, or the ``x-kvlint-routing-key`` header), then by the
conversation it continues, so that two users of one agent without ids are two sessions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvlint_cache._http import (
    OPENAI_PATHS,
    GuardLike,
    GuardSessions,
    build_client,
    install_guard as _install_guard,
    unwrap_guard_error,
)

__all__ = [
    "OPENAI_PATHS",
    "GuardSessions",
    "guard_async_http_client",
    "guard_http_client",
    "install_guard",
    "unwrap_guard_error",
]


def guard_http_client(
    guard: GuardLike | GuardSessions | None = None,
    *,
    client_class: type | None = None,
    paths: Iterable[str] = OPENAI_PATHS,
    **client_kwargs: Any,
) -> Any:
    """A sync HTTP client for ``openai.OpenAI(http_client=...)`` that guards every prompt.

    ``guard``: a :class:`~kvlint_cache.Guard`, a factory of guards (one per session), or
    ``None`` (a warn-mode guard per session). ``client_class``: ``httpx2.Client`` by default
    when installed, else ``httpx.Client``; ``client_kwargs`` go to its constructor. The
    sessions are at ``client.kvlint_guard``.

    Warn mode warns (:class:`~kvlint_cache.CacheWarning`) at the application's call; error
    mode raises :class:`~kvlint_cache.GuardError` from the ``create`` call, before anything
    is sent.
    """
    return build_client(guard, client_class, False, paths, None, client_kwargs)


def guard_async_http_client(
    guard: GuardLike | GuardSessions | None = None,
    *,
    client_class: type | None = None,
    paths: Iterable[str] = OPENAI_PATHS,
    **client_kwargs: Any,
) -> Any:
    """:func:`guard_http_client` for ``openai.AsyncOpenAI(http_client=...)`` (an
    ``AsyncClient``, whose request hooks are awaited)."""
    return build_client(guard, client_class, True, paths, None, client_kwargs)


def install_guard(
    client: Any,
    guard: GuardLike | GuardSessions | None = None,
    *,
    paths: Iterable[str] = OPENAI_PATHS,
) -> GuardSessions:
    """Add the guard's request hook to an existing client (sync or async); returns the
    sessions, also set as ``client.kvlint_guard``."""
    return _install_guard(client, guard, paths=paths, passthrough=None)
