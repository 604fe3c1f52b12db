"""The pytest plugin ``kvlint`` (entry point ``pytest11``): check that the prompts a test
sends keep their cached prefix.

- fixture ``kvlint_guard``: for the test's duration, every POST of a prompt
  (``…/chat/completions``, ``…/responses``, ``…/messages``) sent by any ``httpx`` or
  ``httpx2`` client (so ``openai``, ``anthropic``, LangChain, the Agents SDK) goes through a
  fresh warn-mode :class:`~kvlint_cache.Guard` per session, grouped by a per-user id
  (``metadata.user_id``, ``user``), else ``prompt_cache_key`` or the ``x-kvlint-routing-key``
  header (else one session); a first turn (one user message, no answer) starts a new session.
  Nothing is refused: the findings are recorded (``kvlint_guard.findings``, ``.errors()``).
- :func:`assert_prefix_stable`: fails the test with each error finding's rule, turn and
  message.
- marker ``@pytest.mark.kvlint_prefix_stable``: uses the fixture and asserts at the end of
  the test.

It patches ``Client.send`` / ``AsyncClient.send`` (not event hooks), so clients the test did
not build are covered too. The request is inspected before the original ``send`` runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable

import pytest

from kvlint_cache._http import (
    ALL_PATHS,
    GuardSessions,
    format_findings,
    request_body,
    retry_count,
)

if TYPE_CHECKING:
    from kvlint_cache._kvlint import Finding, Guard

__all__ = ["KvlintRecorder", "assert_prefix_stable"]

MARKER = "kvlint_prefix_stable"


class KvlintRecorder:
    """What the ``kvlint_guard`` fixture gives: the sessions seen and their findings."""

    def __init__(self) -> None:
        from kvlint_cache._kvlint import Guard

        # A test's recorder keeps every body: a test sends few, and reports them all.
        self.sessions = GuardSessions(lambda: Guard(mode="warn"), keep_bodies=_EVERY_BODY)

    @property
    def guards(self) -> dict[str, Guard]:
        """Session key → :class:`~kvlint_cache.Guard`."""
        return self.sessions.guards

    @property
    def bodies(self) -> list[Mapping[str, Any]]:
        """Every observed request body, in order."""
        return [body for _, body, _ in self.sessions.observed]

    @property
    def findings(self) -> list[Finding]:
        """Every finding, in order of the requests."""
        return [finding for _, _, outcome in self.sessions.observed for finding in outcome.findings]

    def errors(self) -> list[Finding]:
        """The error findings (cached content recomputed)."""
        return [finding for finding in self.findings if finding.severity == "error"]

    def observe_request(self, request: Any) -> None:
        body = request_body(request, ALL_PATHS)
        if body is None:
            return
        import warnings

        from kvlint_cache._kvlint import CacheWarning

        with warnings.catch_warnings():  # recorded here, reported by assert_prefix_stable
            warnings.simplefilter("ignore", CacheWarning)
            self.sessions.observe(body, request.headers, retry=retry_count(request.headers))


#: As many bodies as a recorder may keep (the native multiplexer's bound is a machine word).
_EVERY_BODY = sys.maxsize


def _client_classes() -> Iterator[type[Any]]:
    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        yield module.Client
        yield module.AsyncClient


@pytest.fixture
def kvlint_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> KvlintRecorder:
    """Route every prompt request of this test through a fresh guard per session."""
    recorder = KvlintRecorder()
    for cls in _client_classes():
        original = cls.send
        if getattr(original, "_kvlint_patched", False):  # nested use: keep the outer patch
            continue
        send: Callable[..., Any]
        if cls.__name__ == "AsyncClient":

            @functools.wraps(original)
            async def async_send(
                self: Any, req: Any, *args: Any, _orig: Any = original, **kwargs: Any
            ) -> Any:
                recorder.observe_request(req)
                return await _orig(self, req, *args, **kwargs)

            send = async_send
        else:

            @functools.wraps(original)
            def sync_send(
                self: Any, req: Any, *args: Any, _orig: Any = original, **kwargs: Any
            ) -> Any:
                recorder.observe_request(req)
                return _orig(self, req, *args, **kwargs)

            send = sync_send
        send.__dict__["_kvlint_patched"] = True  # read above: a nested use keeps this patch
        monkeypatch.setattr(cls, "send", send)
    request.node._kvlint_recorder = recorder
    return recorder


def assert_prefix_stable(guard_or_fixture: Any) -> None:
    """Fail the test (``pytest.fail``) when an error finding was seen: each finding's rule,
    turn and message.

    Takes the ``kvlint_guard`` fixture, a :class:`GuardSessions` (``client.kvlint_guard``),
    an ``Outcome``/``Report`` (or anything with ``findings``), or a list of findings. A bare
    :class:`~kvlint_cache.Guard` keeps only counters: it fails on ``recomputed_tokens`` or
    ``refused_turns`` without the findings' text.
    """
    errors = _errors_of(guard_or_fixture)
    if errors is None:  # a Guard: counters only
        counters = guard_or_fixture.counters
        if counters.get("refused_turns") or counters.get("recomputed_tokens"):
            pytest.fail(
                "kvlint: the prefix broke: "
                + ", ".join(
                    f"{rule} ×{count}" for rule, count in counters.get("breaks_by_rule", {}).items()
                )
                + f" ({counters.get('recomputed_tokens', 0)} cached tokens recomputed)",
                pytrace=False,
            )
        return
    if errors:
        pytest.fail(
            f"kvlint: {len(errors)} cache break(s) in the prompts sent:\n"
            + format_findings(errors),
            pytrace=False,
        )


def _errors_of(value: Any) -> list[Finding] | None:
    if isinstance(value, KvlintRecorder):
        return value.errors()
    if isinstance(value, GuardSessions):
        return [f for _, _, outcome in value.observed for f in outcome.errors()]
    if hasattr(value, "counters") and not hasattr(value, "findings"):
        return None
    findings = getattr(value, "findings", value)
    return [f for f in findings if getattr(f, "severity", None) == "error"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: route the test's OpenAI/Anthropic requests through kvlint guards "
        "(the kvlint_guard fixture) and fail the test on a cache break",
    )


@pytest.fixture(autouse=True)
def _kvlint_prefix_stable_marker(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker(MARKER) is not None:
        request.getfixturevalue("kvlint_guard")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    recorder = getattr(item, "_kvlint_recorder", None)
    if recorder is not None and item.get_closest_marker(MARKER) is not None:
        assert_prefix_stable(recorder)
    return result
