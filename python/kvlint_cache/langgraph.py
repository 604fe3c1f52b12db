"""A LangGraph ``pre_model_hook`` that builds each model input with a
:class:`~kvlint_cache.Conversation`, so that every request extends the previous one.

    from langgraph.prebuilt import create_react_agent
    from kvlint_cache import Conversation
    from kvlint_cache.langgraph import conversation_hook

    hook = conversation_hook(Conversation, static=["You are a coding agent."], window=(40, 10))
    agent = create_react_agent(model, tools, pre_model_hook=hook, checkpointer=InMemorySaver())

The contract (langgraph-prebuilt 1.1.3, langgraph/prebuilt/chat_agent_executor.py,
``create_react_agent``, its docstring and ``_get_model_input_state``): the hook is a graph
node that runs before every model call and takes the graph state (``state["messages"]``); it
returns a state update with ``messages`` (which REPLACES the state's messages, with
``RemoveMessage(id=REMOVE_ALL_MESSAGES)``) and/or ``llm_input_messages`` (used as the model's
input for this call only, the state untouched). ``_get_model_input_state`` takes
``llm_input_messages`` when present, else ``messages``, runs ``_validate_chat_history`` on it
(every tool call needs its tool message), and the agent's ``prompt`` (``_get_prompt_runnable``)
is still PREPENDED to it: use this hook with ``prompt=None`` and give the system text as
``static=`` (or a ``SystemMessage`` in the input), or it is sent twice.

This hook returns only ``llm_input_messages``: the state keeps every message (the checkpoint
is the full record), and the model sees the conversation the :class:`Conversation` renders.
Messages are appended to it once each (tracked per thread by message id and position):
``SystemMessage`` → ``add_static``, ``HumanMessage`` → ``push_user``, ``AIMessage`` →
``push_assistant`` (text, tool calls, thinking blocks), ``ToolMessage`` → ``push_tool_result``.
Instead of ``langchain_core.messages.trim_messages(strategy="last")`` (which keeps the last
``max_tokens`` worth of messages, so the window slides and the first kept message changes
every turn: a full cache miss every turn once the history is long; langchain_core/messages/
utils.py, ``trim_messages`` / ``_last_max_tokens``), ``window=(max_messages, keep_messages)``
compacts with ``Conversation.enforce_window``: nothing is dropped until history exceeds
``max_messages``, then it is cut to ``keep_messages`` at once, so the prefix is stable again
for ``max_messages - keep_messages`` messages.

The messages the model gets are ``Conversation.to_openai_chat(...)["messages"]`` converted
back with ``langchain_core.messages.convert_to_messages`` (which takes OpenAI chat dicts and
parses each tool call's ``arguments`` into ``args``). LangChain's chat model serializes them
again (``langchain_openai.chat_models.base._convert_message_to_dict``, tool-call arguments with
``json.dumps``), deterministically: the bytes on the wire are the same every turn, though not
necessarily the bytes of the Conversation's own body.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from kvlint_cache._http import GuardLike, GuardSessions
from kvlint_cache._kvlint import CacheWarning, Conversation, ConversationError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["ConversationHook", "conversation_hook", "feed_message"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _user_parts(content: Any) -> str | list[dict[str, Any]]:
    """LangChain content as the Conversation takes it: a string, or parts in OpenAI chat or
    Anthropic shape. LangChain's standard blocks (``{"type": "image", "base64": …,
    "mime_type": …}`` / ``{"type": "image", "url": …}``) become OpenAI ``image_url`` parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content or []:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            continue
        block = dict(block)
        if block.get("type") == "image" and "source" not in block:
            if "base64" in block:
                mime = block.get("mime_type", "image/png")
                url = f"data:{mime};base64,{block['base64']}"
            else:
                url = block.get("url", "")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append(block)
    return parts


def feed_message(conversation: Conversation, message: Any) -> None:
    """Append one LangChain message to ``conversation`` (see the module's doc)."""
    kind = getattr(message, "type", None)
    if kind == "system":
        conversation.add_static(_text_of(message.content))
    elif kind == "human":
        conversation.push_user(_user_parts(message.content))
    elif kind == "ai":
        content = message.content
        thinking = []
        if not isinstance(content, str):
            thinking = [
                dict(block)
                for block in content
                if isinstance(block, Mapping)
                and block.get("type") in ("thinking", "redacted_thinking")
            ]
        calls = [
            {"id": call["id"], "name": call["name"], "arguments": call.get("args", {})}
            for call in (getattr(message, "tool_calls", None) or [])
        ]
        conversation.push_assistant(_text_of(content), calls, thinking=thinking)
    elif kind == "tool":
        conversation.push_tool_result(message.tool_call_id, _user_parts(message.content))
    else:
        raise ConversationError(
            f"kvlint_cache.langgraph: a message of type {kind!r} has no place in a Conversation"
        )


class _Thread:
    __slots__ = ("conversation", "seen")

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        # The id of every state message already appended, in order (None: no id).
        self.seen: list[str | None] = []


class ConversationHook:
    """The ``pre_model_hook`` (see :func:`conversation_hook`). ``conversations`` maps each
    thread id (``config["configurable"]["thread_id"]``, ``""`` without one) to its
    :class:`Conversation`; ``guard`` holds the guards (one per thread) when one was given."""

    def __init__(
        self,
        conversation: Conversation | Callable[[], Conversation],
        *,
        model: str = "model",
        static: Sequence[str] = (),
        tools: Sequence[Any] = (),
        window: tuple[int, int] | None = None,
        guard: GuardLike | None = None,
    ) -> None:
        self._single: Conversation | None = None
        self._factory: Callable[[], Conversation] = Conversation
        if isinstance(conversation, Conversation):
            self._single = conversation
        else:
            self._factory = conversation
        self.model = model
        self.static = list(static)
        self.tools = [_tool_definition(tool) for tool in tools]
        self.window = window
        self.guard = GuardSessions(guard) if guard is not None else None
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.Lock()

    @property
    def conversations(self) -> dict[str, Conversation]:
        return {key: thread.conversation for key, thread in self._threads.items()}

    def _new_conversation(self) -> Conversation:
        if self._single is not None:
            if self._threads:
                raise ConversationError(
                    "kvlint_cache.langgraph: one Conversation serves one thread; pass a factory "
                    "(e.g. the Conversation class) to keep one per thread"
                )
            conversation = self._single
        else:
            conversation = self._factory()
        for text in self.static:
            conversation.add_static(text)
        for tool in self.tools:
            conversation.add_tool(tool)
        return conversation

    # LangGraph passes the config only to a parameter named `config` that is unannotated or
    # annotated `RunnableConfig` or `Optional[RunnableConfig]`, compared as written (here a
    # string): `RunnableConfig | None` is not passed it (langgraph/_internal/_runnable.py,
    # KWARGS_CONFIG_KEYS).
    def __call__(
        self,
        state: Any,
        config: Optional[RunnableConfig] = None,  # noqa: UP045 - see above
    ) -> dict[str, Any]:
        messages = state["messages"] if isinstance(state, Mapping) else state.messages
        configurable = (config or {}).get("configurable", {}) or {}
        key = str(configurable.get("thread_id", ""))
        with self._lock:
            thread = self._threads.get(key)
            if thread is None:
                thread = self._threads[key] = _Thread(self._new_conversation())
            thread = self._sync(key, thread, messages)
            conversation = thread.conversation
            cache_break = None
            if self.window is not None:
                cache_break = conversation.enforce_window(*self.window)
            body = conversation.to_openai_chat(self.model)
            if self.guard is not None:
                guard = self.guard.guard_for(key)
                if cache_break is not None:
                    guard.expect_break()
                self.guard.observe(body, key=key)
        from langchain_core.messages import convert_to_messages

        return {"llm_input_messages": convert_to_messages(body["messages"])}

    def _sync(self, key: str, thread: _Thread, messages: Sequence[Any]) -> _Thread:
        """Append the state messages not yet seen; rebuild after a rewritten state."""
        seen = thread.seen
        rewritten = len(messages) < len(seen) or any(
            old is not None and getattr(message, "id", None) != old
            for old, message in zip(seen, messages)
        )
        if rewritten:
            if self._single is not None:
                raise ConversationError(
                    "kvlint_cache.langgraph: the graph state's messages were rewritten; a Conversation "
                    "is append-only (compact it instead of editing the state)"
                )
            warnings.warn(
                "kvlint_cache.langgraph: the graph state's messages were rewritten: rebuilding the "
                "conversation, the cached prefix is lost (use window= instead of editing the state)",
                CacheWarning,
                stacklevel=4,
            )
            thread = self._threads[key] = _Thread(self._new_conversation())
            seen = thread.seen
        for message in messages[len(seen) :]:
            feed_message(thread.conversation, message)
            seen.append(getattr(message, "id", None))
        return thread


def _tool_definition(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Mapping):
        return dict(tool)
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool)


def conversation_hook(
    conversation: Conversation | Callable[[], Conversation],
    *,
    model: str = "model",
    static: Sequence[str] = (),
    tools: Sequence[Any] = (),
    window: tuple[int, int] | None = None,
    guard: GuardLike | None = None,
) -> ConversationHook:
    """A ``pre_model_hook`` for ``create_react_agent`` that feeds the graph's messages into a
    :class:`Conversation` (one per thread when given a factory, such as the class itself) and
    returns ``{"llm_input_messages": …}`` rendered by it.

    ``static``: system texts added to each new conversation (use with ``prompt=None``).
    ``tools``: the agent's tools (LangChain tools or dicts of any API's shape), added so that
    the conversation's body, which the guard sees, carries them; the model call sends the
    tools bound to the model. ``window``: ``(max_messages, keep_messages)`` for
    ``Conversation.enforce_window``. ``guard``: a Guard or a factory; each rendered body is
    observed (a compaction is announced with ``expect_break``); error mode raises
    :class:`~kvlint_cache.GuardError` out of ``agent.invoke``. ``model`` only names the model
    in the conversation's body.
    """
    return ConversationHook(
        conversation, model=model, static=static, tools=tools, window=window, guard=guard
    )
