"""Type stubs of the native module ``kvlint_cache._kvlint`` (Rust, PyO3).

Every ``dict`` here is a plain JSON-like Python object (``dict``/``list``/``tuple``/``str``/
``int``/``float``/``bool``/``None``): request bodies in the OpenAI Chat Completions, OpenAI
Responses or Anthropic Messages format, tool definitions in any of the three APIs' shapes,
message parts in OpenAI chat or Anthropic shape. A ``set`` or ``frozenset`` anywhere in one
raises :class:`ConversationError` at the call: it iterates in hash-seed order, so the same
conversation built in another process would send other bytes (pass a sorted list).
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, final

from typing_extensions import TypeAlias, disjoint_base

__all__ = [
    "PROMPT_PATHS",
    "ROUTING_KEY_HEADER",
    "SUMMARY_SESSION_KEY",
    "TRACE_ROW_COLUMNS",
    "CacheWarning",
    "Conversation",
    "ConversationError",
    "Finding",
    "Guard",
    "GuardError",
    "GuardSessions",
    "Outcome",
    "Report",
    "TierChange",
    "Workload",
    "__version__",
    "check",
    "opens_conversation",
    "run_cli",
    "session_key",
    "trace_rows",
]

Severity: TypeAlias = Literal["error", "warning", "info"]

@final
class Finding:
    """One diagnostic, as ``kvlint check`` reports it for the same pair of turns.

    A finding from a body that came from no file has no span: ``part`` names the place in
    the body (``"messages[0].content"``, ``"tools[1]"``).
    """

    rule: str
    """The rule's name: ``volatile-timestamp``, ``history-rewrite``, ``tool-order``, …"""
    code: str
    """The rule's stable code (as in the JSON report)."""
    severity: Severity
    """``"error"``: cached tokens are recomputed; ``"warning"``: a likely mistake that breaks
    nothing yet; ``"info"``: a cost by design (the previous turn's turn tier dropped)."""
    message: str
    turn: int
    """The turn (0-based request index in its session) where the break shows."""
    tokens_lost: int
    """Tokens the previous turn had cached that this turn recomputes (or drops, for info)."""
    part: str | None
    """Where in the body: a JSON path such as ``messages[1].content[0]``, or ``None``."""
    help: str
    """How to fix it."""
    def to_dict(self) -> dict[str, Any]: ...

@disjoint_base
class Outcome:
    """Findings: of one :meth:`Guard.observe`, or of a session (:class:`Report`). Reads as a
    sequence of :class:`Finding`."""

    findings: list[Finding]
    def is_clean(self) -> bool:
        """No error and no warning (infos are costs by design)."""
    def errors(self) -> list[Finding]:
        """The breaks: cached content sent again and recomputed."""
    def warnings(self) -> list[Finding]: ...
    def costs(self) -> list[Finding]:
        """The previous turn's per-turn tail, dropped by design (info findings, with
        ``tokens_lost``)."""
    @property
    def tokens_lost(self) -> int:
        """Tokens lost over all findings, errors and costs."""
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Finding]: ...
    def __getitem__(self, index: int, /) -> Finding: ...

@final
class Report(Outcome):
    """The result of :func:`check` over one session's bodies."""

    prompt_tokens: int
    reused_tokens: int
    """Leading tokens each turn shares with the turn before it: what a cache serves."""
    def to_dict(self) -> dict[str, Any]:
        """``findings`` (as dicts), ``prompt_tokens``, ``reused_tokens``."""

def check(bodies: Sequence[Mapping[str, Any]]) -> Report:
    """Check a session: the request bodies an agent sent, turn by turn, in order, in provider
    mode (the order hosted APIs cache in, tokenized with ``o200k_base``), as ``kvlint check``
    does. Raises :class:`ConversationError` for a body of no format kvlint reads.
    """

class CacheWarning(UserWarning):
    """A mistake that does not stop the call (a non-strict :class:`Conversation`): issued
    with :func:`warnings.warn` at the call that made it."""

class ConversationError(ValueError):
    """An input the provider would reject (a tool result without its call, an empty
    message, …), or a change that a strict :class:`Conversation` refuses."""

class GuardError(Exception):
    """:class:`Guard` in ``mode="error"`` refusing a request that recomputes cached content.
    The refused request is not recorded: the next one is compared with the last accepted turn."""

    findings: list[Finding]
    """Every finding of the refused turn, errors and infos."""

@final
class TierChange:
    """What an ``add_*`` call did to the prefix. True when applied."""

    applied: bool
    """In the prompt from the next body on (or already there)."""
    deferred: bool
    """Waiting for the next compaction (:attr:`Conversation.pending_changes`): the prefix is
    committed (a :class:`CacheWarning` was issued at the call)."""
    cost_blocks: int
    """Blocks of the current prefix the deferred change recomputes when it is applied."""
    volatile: list[dict[str, Any]]
    """Timestamps and ids found in a cached tier: ``{"tier", "class", "value", "rule",
    "code"}`` (each also a :class:`CacheWarning` at the call)."""
    def __bool__(self) -> bool: ...

@final
class Conversation:
    """One agent session in stability tiers (static, session, history, turn) with an
    append-only history; every body adapter renders the tiers in that order.

    Non-strict (default): a mistake that keeps the call valid is a :class:`CacheWarning` at
    the call; ``strict=True``: it is a :class:`ConversationError`.
    """

    def __new__(cls, *, strict: bool = False) -> Conversation: ...
    @property
    def is_strict(self) -> bool: ...
    def add_static(self, text: str) -> TierChange:
        """Instructions stable for every session (rendered in the order added)."""
    def add_session(self, key: str, text: str) -> TierChange:
        """A block stable for one session (user profile, memory), sorted by key. After the
        prefix is committed, a new value is shown in the turn tier and then frozen into the
        next appended message as a note."""
    def add_tool(self, definition: Mapping[str, Any]) -> TierChange:
        """A tool in any of the three APIs' shapes; canonicalized, rendered sorted by name.
        Fields beside the name, description and schema (OpenAI's ``"strict": true``) are
        kept and sent after the schema, in key order; ``cache_control`` is not (the
        conversation places the breakpoints)."""
    def add_turn_context(self, text: str) -> None:
        """Per-request context (time, cwd, budgets): appended to the newest message, dropped
        from the next turn; cleared when the model's answer is appended."""
    def clear_turn_context(self) -> None: ...
    def push_user(self, content: str | Sequence[Mapping[str, Any]]) -> None:
        """A user message: text, or parts in OpenAI chat or Anthropic shape (``text``,
        ``image_url``/``image``, ``document``/``file``)."""
    def push_assistant(
        self,
        text: str = "",
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        *,
        thinking: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """The model's answer. ``tool_calls``: ``{"id", "name", "arguments"}`` with arguments
        as a JSON string (its bytes are kept) or a dict (serialized once, keys sorted at every
        depth, lists in their order; a ``set`` raises). ``thinking``:
        Anthropic ``thinking``/``redacted_thinking`` blocks, verbatim (signatures kept)."""
    def push_tool_result(
        self, call_id: str, content: str | Sequence[Mapping[str, Any]]
    ) -> None: ...
    def push_openai_response(self, response: Mapping[str, Any]) -> None:
        """Append the assistant message of a Chat Completions response (``choices[0]``)."""
    def push_responses_output(self, response: Mapping[str, Any]) -> None:
        """Append the output items of a Responses API response."""
    def push_anthropic_response(self, response: Mapping[str, Any]) -> None:
        """Append the content blocks of an Anthropic Messages response."""
    @staticmethod
    def from_body(body: Mapping[str, Any]) -> Conversation:
        """Rebuild a conversation from a request body of any of the three formats. The next
        body extends the imported one when it was assembled as this package assembles (tools
        sorted by name and canonical, one system message); otherwise the first body built
        differs where the import was not (tools sorted, schemas key-sorted), once, and every
        later one extends it."""
    def to_openai_chat(self, model: str) -> dict[str, Any]:
        """A Chat Completions body (with ``prompt_cache_key``). Commits the prefix."""
    def to_openai_responses(self, model: str) -> dict[str, Any]:
        """A Responses API body (with ``prompt_cache_key``). Commits the prefix."""
    def to_anthropic(self, model: str, *, max_tokens: int = ...) -> dict[str, Any]:
        """An Anthropic Messages body with ``cache_control`` breakpoints. Commits the prefix.
        ``max_tokens``: by default the Rust SDK's ``ANTHROPIC_DEFAULT_MAX_TOKENS`` (4096)."""
    def preview(self) -> Conversation:
        """A copy to build bodies from without committing this conversation's prefix."""
    def compact(self, keep_last: int, *, summary: str | None = None) -> dict[str, Any]:
        """Drop all but the last ``keep_last`` messages (the cut moves to a user message),
        apply the pending tier changes; ``summary`` (of what is dropped) is folded into the
        prefix as the session block :data:`SUMMARY_SESSION_KEY`, in the same break, without a
        warning and in strict mode too. Returns the CacheBreak (what is lost) as a dict:
        ``dropped_messages``, ``kept_messages``, ``kept_beyond_asked``, ``reused_blocks``,
        ``lost_blocks``, ``applied_changes``. When no user message follows the cut, it moves
        back to the last one (an assistant message first is rejected): a
        :class:`CacheWarning` says how many more were kept. Tell the guard with
        :meth:`Guard.expect_break`."""
    def enforce_window(self, max_messages: int, keep_messages: int) -> dict[str, Any] | None:
        """Compact to ``keep_messages`` only when history outgrows ``max_messages``; the
        CacheBreak as a dict, or None when nothing was dropped."""
    @property
    def routing_key(self) -> str:
        """The prefix fingerprint after the tools and static tier: what every compaction keeps,
        so a session stays on its replica (sent as ``prompt_cache_key`` and in the headers)."""
    def routing_headers(self) -> dict[str, str]:
        """``x-kvlint-routing-key`` and ``X-SMG-Routing-Key``, both carrying :attr:`routing_key`."""
    @property
    def is_committed(self) -> bool: ...
    @property
    def history(self) -> list[dict[str, Any]]: ...
    @property
    def pending_changes(self) -> list[dict[str, Any]]: ...
    def to_json(self) -> str:
        """Everything (tiers, history, pending changes, committed state) as JSON text."""
    @staticmethod
    def from_json(text: str) -> Conversation:
        """Restore :meth:`to_json`: the restored conversation sends the same bytes."""

@final
class Guard:
    """``kvlint check`` on each pair of turns of ONE session, as they are sent.

    ``mode="warn"`` returns the findings; ``mode="error"`` raises :class:`GuardError` for a
    turn that recomputes cached content (and does not record it).
    """

    def __new__(cls, *, mode: Literal["warn", "error"] = "warn") -> Guard: ...
    @property
    def mode(self) -> Literal["warn", "error"]: ...
    @property
    def findings(self) -> list[Finding]:
        """Every finding so far, in order (refused turns included)."""
    def observe(self, body: Mapping[str, Any]) -> Outcome:
        """Check the next request body of the session against the last accepted one."""
    def expect_break(self) -> None:
        """The next request breaks the prefix on purpose (after a compaction): its findings
        are counted as expected and ``mode="error"`` does not refuse it. The guarded clients
        keep the session when that request reads as a first turn (a compaction down to one
        message)."""
    @property
    def is_break_expected(self) -> bool:
        """Whether :meth:`expect_break` announced a break not yet observed."""
    def reset(self) -> None:
        """Forget the previous turn: the next request starts a new session."""
    @property
    def counters(self) -> dict[str, Any]:
        """``turns``, ``refused_turns``, ``prompt_tokens``, ``reused_tokens``,
        ``recomputed_tokens``, ``dropped_tokens``, ``breaks_by_rule`` (dict: error and
        warning findings by rule), ``costs_by_rule`` (dict: info findings by rule, costs by
        design such as the per-turn tail each turn drops; not breaks), ``expected_breaks``
        (announced turns that broke the prefix)."""
    def observe_response(self, response: Mapping[str, Any]) -> bool:
        """Show the guard the API's response to the last request: the cache usage it
        reports is summed in :attr:`reported_usage`. False when it reports none."""
    @property
    def reported_usage(self) -> dict[str, int]:
        """The cache usage the API reported for the responses shown, summed: ``responses``,
        ``input_tokens`` (cached ones included), ``cache_read_input_tokens``,
        ``cache_creation_input_tokens``."""
    def otel_attributes(self) -> dict[str, int]:
        """The same under OpenTelemetry's GenAI attribute names
        (``gen_ai.usage.input_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
        ``gen_ai.usage.cache_creation.input_tokens``)."""

@final
class GuardSessions:
    """One :class:`Guard` per session key (kvlint's multiplexer): ``guard`` is one Guard for
    every session, a factory called once per session, or ``None`` (a warn-mode Guard per
    session). At most ``max_sessions`` guards are kept, the least recently used dropped
    first, and the latest ``keep_bodies`` bodies."""

    def __new__(
        cls,
        guard: Guard | Callable[[], Guard] | None = None,
        *,
        max_sessions: int = 10_000,
        keep_bodies: int = 1_000,
    ) -> GuardSessions: ...
    def observe(
        self,
        body: Mapping[str, Any],
        headers: Sequence[tuple[str, str]] = ...,
        *,
        key: str | None = None,
        retry: int = 0,
    ) -> tuple[Outcome, bool] | None:
        """Observe ``body`` with its session's guard: the outcome and whether it holds a break
        the application did not announce; ``None`` for a retry not observed again. A refusal,
        or a retry of the refused body, raises the guard's error."""
    def observe_response(
        self,
        body: Mapping[str, Any],
        response: Mapping[str, Any],
        headers: Sequence[tuple[str, str]] = ...,
    ) -> bool:
        """Show the guard of the session ``body`` belongs to the API's ``response`` to it;
        False when the session is not kept or the response reported no cache usage."""
    def guard_for(self, key: str) -> Guard:
        """The guard of session ``key`` (made when the session is new)."""
    @property
    def guards(self) -> dict[str, Guard]:
        """The sessions kept and their guards, least recently used first."""
    @property
    def observed(self) -> list[tuple[str, dict[str, Any], Outcome]]:
        """The latest bodies observed, each ``(key, body, outcome)``."""
    @property
    def max_sessions(self) -> int: ...
    @property
    def keep_bodies(self) -> int: ...
    def __len__(self) -> int: ...

__version__: str
ROUTING_KEY_HEADER: str
"""``x-kvlint-routing-key``: the header gateways route a session on."""
SUMMARY_SESSION_KEY: str
"""``"summary"``: the session block ``Conversation.compact(summary=...)`` folds a summary into."""
PROMPT_PATHS: tuple[str, ...]
"""The path endings whose POST bodies are prompts: ``/chat/completions``, ``/responses``,
``/messages``."""

def opens_conversation(body: Mapping[str, Any]) -> bool:
    """Whether a body opens a conversation: one user message and no answer yet."""

def session_key(body: Mapping[str, Any], headers: Sequence[tuple[str, str]] = ...) -> str:
    """The session a request belongs to, from its body and headers (name, value): the first
    source of kvlint's session-key table it carries; ``""`` when none."""

def run_cli(argv: Sequence[str]) -> int:
    """Run the ``kvlint`` command line (``argv[0]`` is the program name); the exit code."""

TRACE_ROW_COLUMNS: tuple[str, ...]
"""The columns of the workload's rows, in order, as :func:`trace_rows` writes them and
:meth:`Workload.from_rows` reads them."""

def trace_rows(
    names: Sequence[str],
    contents: Sequence[bytes | str],
    *,
    block_size: int = 16,
    tokenizer: str | None = None,
    chat_template: str | None = None,
    serving_engine: str = "vllm",
    log: bool = False,
) -> dict[str, list[Any]]:
    """The workload's map step: each file (named relative to the workload's folder; bytes or
    text, gzip inflated) traced into one row per request, as columns
    (:data:`kvlint_cache.workload.COLUMNS`); a file or session that cannot be traced is one
    row with its ``error``. With ``log``, each content is a request log's rows (JSON Lines,
    plain, gzip or zstd) holding every row of the session keys in it, grouped into sessions as
    ``kvlint workload --log`` groups them; a row not traced (bad, or a request that takes no
    prompt) is a row with its ``error``. The GIL is released while tracing."""

@final
class Workload:
    """The workload's reduce step: rows from any number of map calls, in any order, joined
    into the trace ``kvlint workload`` builds from the same files."""

    @staticmethod
    def from_rows(columns: Mapping[str, Sequence[Any]]) -> Workload:
        """Join rows given as columns (a dict of lists, or a table's ``to_pydict()``)."""
    @property
    def rows(self) -> int:
        """Rows read, the failed ones included."""
    @property
    def errors(self) -> list[tuple[str, int, str]]:
        """``(file, session, error)`` of each file or session that could not be traced."""
    def report(self) -> dict[str, Any]:
        """The report ``kvlint workload --format json`` prints for the same files."""
    def report_html(self, name: str = "workload") -> str:
        """The page ``kvlint workload --format html`` writes, the workload named ``name``."""
    def export_trace(self, format: str, block_size: int | None = None) -> str:
        """The hashed trace ``kvlint workload --export-trace FORMAT --block-size N`` writes
        (the format's block size by default)."""
