"""What the HTTP integrations share: which requests carry a prompt, which session a body
belongs to, one Guard per session, and raising or warning where the caller sees it.

Works with both ``httpx`` and ``httpx2`` requests (``openai`` >= 3 and ``anthropic`` >= 2 are
built on ``httpx2``; ``openai`` also still accepts an ``httpx`` client, ``anthropic`` does not:
``anthropic._base_client._reject_httpx_object``). Only duck-typed attributes of the request are
used: ``method``, ``url.path``, ``headers``, ``content``.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Iterable, Mapping
from types import FrameType
from typing import Any, Callable, Union

from kvlint_cache import _kvlint
from kvlint_cache._kvlint import CacheWarning, Guard, Outcome

#: The header `Conversation.routing_headers()` sends; gateways route on it, and the guards
#: here group requests into sessions by it (kvlint's protocol crate owns it).
ROUTING_KEY_HEADER: str = _kvlint.ROUTING_KEY_HEADER

#: Paths whose POST bodies are prompts (the protocol crate's list, through the native module).
#: Matched on the end of the path, so a base URL with a prefix (``/v1``, a proxy's
#: ``/openai/v1``) works; ``/responses/input_tokens``, ``/messages/count_tokens`` and
#: ``/messages/batches`` do not match. Anthropic's client sends ``/messages``, OpenAI's the
#: others.
ALL_PATHS: tuple[str, ...] = tuple(_kvlint.PROMPT_PATHS)
ANTHROPIC_PATHS: tuple[str, ...] = tuple(path for path in ALL_PATHS if path == "/messages")
OPENAI_PATHS: tuple[str, ...] = tuple(path for path in ALL_PATHS if path not in ANTHROPIC_PATHS)

# Both SDKs number their attempts in this header (openai/_base_client.py,
# BaseClient._build_headers; anthropic/_base_client.py, BaseClient._build_headers). A retry
# resends a body already observed (or refused): it is not observed again, and a refused one is
# refused again.
_RETRY_HEADER = "x-stainless-retry-count"

GuardLike = Union[Guard, Callable[[], Guard]]


def request_body(request: Any, paths: Iterable[str] = ALL_PATHS) -> dict[str, Any] | None:
    """The JSON body of a prompt request (a POST to one of ``paths``), else None.

    Bodies that are not a JSON object (multipart uploads, streams not yet read) give None. A
    retry of the SDKs carries the same body: :func:`retry_count` tells it apart.
    """
    if str(request.method).upper() != "POST":
        return None
    path = request.url.path.rstrip("/")
    if not any(path.endswith(suffix) for suffix in paths):
        return None
    try:
        # Both SDKs send bytes content (openai/_base_client.py, BaseClient._build_request:
        # `kwargs["content"] = openapi_dumps(json_data)`), which a Request holds read.
        raw = request.content
    except Exception:  # noqa: BLE001 - httpx(2).RequestNotRead, of either library
        return None  # a streaming body, not a JSON prompt
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def retry_count(headers: Mapping[str, str]) -> int:
    """The SDK's attempt number (``x-stainless-retry-count``; 0 the first attempt)."""
    try:
        return max(0, int(headers.get(_RETRY_HEADER, "0") or 0))
    except ValueError:
        return 0


def session_key(body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> str:
    """Which session a body belongs to, read as every part of kvlint reads it (the protocol
    crate's session-key table, through the native module): a per-user or per-session id the
    body carries (Anthropic's ``metadata.user_id``, OpenAI's ``user`` or
    ``safety_identifier``), else the prefix key (``prompt_cache_key``, then the
    ``x-kvlint-routing-key`` or ``X-SMG-Routing-Key`` header); ``""`` when none is set.

    The prefix key a :class:`Conversation` sends covers its tools and instructions, which every
    session of an application shares: :class:`GuardSessions` tells the sessions under one key
    apart by the conversation each body continues (a second one is kept as ``key#N``).
    """
    pairs = [(str(name), str(value)) for name, value in headers.items()] if headers else []
    return _kvlint.session_key(body, pairs)


def starts_session(body: Mapping[str, Any]) -> bool:
    """Whether a body is the first turn of a conversation: one user message and no answer
    yet (the protocol crate's rule, through the native module). A new conversation that shares
    its key with an earlier one (the prefix key covers only tools and instructions) starts a
    new session instead of reading as a rewrite, unless its guard was told a break comes
    (:meth:`Guard.expect_break`): a compaction down to one message is that break."""
    return _kvlint.opens_conversation(body)


class GuardSessions:
    """One :class:`Guard` per session, bounded so that a long-running client's memory
    stays flat: kvlint's multiplexer (the SDK's ``GuardSessions``, through the native module),
    which tells sessions apart as a recording's requests are grouped: by :func:`session_key`,
    then by the conversation each body continues.

    ``guard`` is either one Guard, used for every request (an application that runs one
    session per client), or a factory such as ``lambda: Guard(mode="error")``, called once per
    session. ``None`` is ``Guard`` (warn mode) as a factory.
    ``max_sessions`` guards are kept, the least recently used dropped first (a dropped
    session's next request starts a new guard, which reads it as a first turn); the latest
    ``keep_bodies`` bodies are kept in :attr:`observed`.

    A retry of a body (the SDKs number their attempts) is not observed again; a retry of a body
    the session's guard refused is refused again, so it is never sent.
    """

    def __init__(
        self,
        guard: GuardLike | None = None,
        *,
        max_sessions: int = 10_000,
        keep_bodies: int = 1_000,
    ) -> None:
        self._native = _kvlint.GuardSessions(
            guard, max_sessions=max_sessions, keep_bodies=keep_bodies
        )

    @property
    def guards(self) -> dict[str, Guard]:
        """The sessions' guards, least recently used first."""
        return self._native.guards

    @property
    def observed(self) -> list[tuple[str, dict[str, Any], Outcome]]:
        """(session key, body, outcome) of the latest observed requests, in order."""
        return self._native.observed

    def guard_for(self, key: str) -> Guard:
        """The guard of session ``key`` (made when the session is new)."""
        return self._native.guard_for(key)

    def observe_response(
        self,
        body: Mapping[str, Any],
        response: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> bool:
        """Show the guard of the session ``body`` belongs to the API's ``response`` to it:
        the cache usage it reports is summed in that guard's ``reported_usage`` (and
        ``otel_attributes()``). False when the session is not kept or nothing was reported."""
        pairs = [(str(name), str(value)) for name, value in headers.items()] if headers else []
        return self._native.observe_response(dict(body), dict(response), pairs)

    def observe(
        self,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        *,
        key: str | None = None,
        retry: int = 0,
    ) -> Outcome | None:
        """Observe one body with its session's guard (``key``, else :func:`session_key`); warn
        (:class:`CacheWarning`) at the caller for an unannounced break in warn mode; error mode
        raises :class:`GuardError`. ``retry``: the client's attempt number; a retry is not
        observed again (None), and a retry of a refused body raises again."""
        pairs = [(str(name), str(value)) for name, value in headers.items()] if headers else []
        observed = self._native.observe(dict(body), pairs, key=key, retry=retry)
        if observed is None:
            return None
        outcome, warn = observed
        if warn:
            warn_at_caller(format_findings(outcome.errors()), CacheWarning)
        return outcome


def format_findings(findings: Iterable[Any]) -> str:
    """``rule (turn N, part): message`` per finding, one a line."""
    lines = []
    for finding in findings:
        where = f"turn {finding.turn}"
        if getattr(finding, "part", None):
            where += f", {finding.part}"
        lines.append(f"{finding.rule} ({where}): {finding.message}")
    return "\n".join(lines)


# Frames of these packages are skipped, so that a warning points at the application's call
# (``client.chat.completions.create(...)``, ``agent.invoke(...)``), not into an SDK.
_LIBRARY_PREFIXES = (
    "kvlint_cache",
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "openai",
    "anthropic",
    "agents",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langgraph",
    "langsmith",
    "pydantic",
    "anyio",
    "asyncio",
    "concurrent",
    "contextlib",
    "contextvars",
    "functools",
    "threading",
    "typing_extensions",
    "_pytest",
    "pluggy",
)


def _is_library(module: str) -> bool:
    top = module.split(".", 1)[0]
    return top in _LIBRARY_PREFIXES


def warn_at_caller(message: str, category: type[Warning] = CacheWarning) -> None:
    """``warnings.warn`` with the stack level of the first frame outside the SDKs."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and _is_library(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + 1 if frame is not None else 2)


_PASSTHROUGH_CLASSES: dict[tuple[type, type], type] = {}


def raise_past(error: BaseException, passthrough: type | None) -> None:
    """Raise ``error`` so that an SDK that wraps other exceptions lets it through.

    ``anthropic`` >= 2 wraps any exception from ``http_client.send`` that is not an
    ``AnthropicError`` into ``APIConnectionError`` and retries it
    (anthropic/_base_client.py: ``SyncAPIClient._attempt_request`` and
    ``SyncAPIClient._should_retry_exception``). Raising an instance of a subclass of both
    ``type(error)`` and ``passthrough`` (``anthropic.AnthropicError``) gets it to the caller
    unchanged and unretried; ``except GuardError`` still catches it, and ``findings`` is kept.
    When such a class cannot be made (an incompatible native layout), ``error`` itself is
    raised: the SDK then raises ``APIConnectionError`` with it as ``__cause__``
    (see :func:`unwrap_guard_error`).
    """
    if passthrough is None or isinstance(error, passthrough):
        raise error
    base = type(error)
    try:
        cls = _PASSTHROUGH_CLASSES.get((base, passthrough))
        if cls is None:
            cls = type(base.__name__, (base, passthrough), {"__module__": base.__module__})
            _PASSTHROUGH_CLASSES[(base, passthrough)] = cls
        wrapped = cls.__new__(cls, *error.args)
        wrapped.args = error.args
        state = getattr(error, "__dict__", None)
        if state:
            wrapped.__dict__.update(state)
        if "findings" not in getattr(wrapped, "__dict__", {}) and hasattr(error, "findings"):
            wrapped.findings = error.findings
    except Exception:  # noqa: BLE001 - whatever failed, the original error is raised instead
        raise error from None
    raise wrapped.with_traceback(error.__traceback__) from None


def unwrap_guard_error(error: BaseException) -> BaseException:
    """The :class:`~kvlint_cache.GuardError` (or other kvlint error) behind an SDK's
    ``APIConnectionError``, following ``__cause__``; ``error`` itself when there is none."""
    from kvlint_cache._kvlint import ConversationError, GuardError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (GuardError, ConversationError)):
            return current
        seen.add(id(current))
        current = current.__cause__
    return error


def default_client_class(asynchronous: bool) -> type:
    """``httpx2.Client``/``AsyncClient`` when ``httpx2`` is installed (what ``openai`` >= 3 and
    ``anthropic`` >= 2 use), else ``httpx``'s."""
    try:
        import httpx2 as module
    except ImportError:
        import httpx as module  # type: ignore[no-redef]  # the same API, another module
    return module.AsyncClient if asynchronous else module.Client


def install_guard(
    client: Any,
    guard: GuardLike | GuardSessions | None = None,
    *,
    paths: Iterable[str] = ALL_PATHS,
    passthrough: type | None = None,
) -> GuardSessions:
    """Add a request event hook to an ``httpx``/``httpx2`` client (sync or async) that passes
    the body of every prompt request to its session's guard before it is sent, and a response
    hook that shows the guard the API's JSON answer (its cache usage: the guard's
    ``reported_usage`` and ``otel_attributes()``; streamed answers are not read).

    Request hooks run in ``Client._send_handling_redirects`` right before
    ``_send_single_request``, once per attempt and redirect (httpx2/_client.py and
    httpx/_client.py); an async client awaits them, so the hook added to an ``AsyncClient`` is
    a coroutine function. The sessions (:class:`GuardSessions`) are returned and also set as
    ``client.kvlint_guard``.
    """
    sessions = guard if isinstance(guard, GuardSessions) else GuardSessions(guard)
    paths = tuple(paths)

    def observe(request: Any) -> None:
        body = request_body(request, paths)
        if body is None:
            return
        try:
            sessions.observe(body, request.headers, retry=retry_count(request.headers))
        except Exception as error:
            from kvlint_cache._kvlint import ConversationError, GuardError

            if isinstance(error, (GuardError, ConversationError)):
                raise_past(error, passthrough)
            raise

    def read_usage(response: Any) -> None:
        body = request_body(response.request, paths)
        try:
            answer = json.loads(response.content)
        except ValueError:
            return
        if body is not None and isinstance(answer, dict):
            sessions.observe_response(body, answer, response.request.headers)

    def answers_json(response: Any) -> bool:
        # A JSON answer is read whole here (httpx keeps it for the SDK); a stream is not.
        content_type = response.headers.get("content-type", "")
        return "json" in content_type and request_body(response.request, paths) is not None

    hooks = dict(client.event_hooks)
    if _is_async_client(client):

        async def async_observe(request: Any) -> None:
            observe(request)

        async def async_read_usage(response: Any) -> None:
            if answers_json(response):
                await response.aread()
                read_usage(response)

        hooks["request"] = [*hooks.get("request", []), async_observe]
        hooks["response"] = [*hooks.get("response", []), async_read_usage]
    else:

        def sync_read_usage(response: Any) -> None:
            if answers_json(response):
                response.read()
                read_usage(response)

        hooks["request"] = [*hooks.get("request", []), observe]
        hooks["response"] = [*hooks.get("response", []), sync_read_usage]
    client.event_hooks = hooks
    client.kvlint_guard = sessions
    return sessions


def _is_async_client(client: Any) -> bool:
    return any(cls.__name__ == "AsyncClient" for cls in type(client).__mro__)


def build_client(
    guard: GuardLike | GuardSessions | None,
    client_class: type | None,
    asynchronous: bool,
    paths: Iterable[str],
    passthrough: type | None,
    client_kwargs: dict[str, Any],
) -> Any:
    cls = client_class or default_client_class(asynchronous)
    client = cls(**client_kwargs)
    install_guard(client, guard, paths=paths, passthrough=passthrough)
    return client
