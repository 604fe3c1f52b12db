"""Guards for the OpenAI Agents SDK (``openai-agents``).

Two places see what an agent sends, and both can raise so that the error reaches the caller
of ``Runner.run`` unchanged:

1. ``RunConfig(call_model_input_filter=...)`` (agents/run_config.py, ``RunConfig``,
   ``CallModelData``, ``ModelInputData``): called right before each model call with the
   instructions and the input items (Responses API items, whichever model class sends them),
   and must return a ``ModelInputData`` (the same or a replacement). It is applied by
   ``agents.run_internal.turn_preparation.maybe_filter_model_input``, which re-raises any
   exception after attaching it to the tracing span. :func:`guard_model_input` builds such a
   filter that checks ``{"model", "instructions", "input"}`` as a Responses body: what the SDK
   assembles, before a model class converts it.

2. The HTTP client of the model's ``AsyncOpenAI``: :func:`chat_completions_model` builds an
   ``OpenAIChatCompletionsModel(model, openai_client=AsyncOpenAI(base_url=..., http_client=
   kvlint_cache.openai.guard_async_http_client(guard)))``
   (agents/models/openai_chatcompletions.py, ``OpenAIChatCompletionsModel.__init__``), which
   is how to point an agent at any OpenAI-compatible server (vLLM, SGLang, llama-server) with
   Chat Completions: the guard sees the exact bytes sent, tools included.

Tracing: the SDK exports traces to OpenAI by default; against another server disable it
(``agents.set_tracing_disabled(True)`` or ``RunConfig(tracing_disabled=True)``).
"""

from __future__ import annotations

from typing import Any, Callable

from kvlint_cache._http import GuardLike, GuardSessions

__all__ = ["chat_completions_model", "guard_model_input"]


def _jsonable(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    if callable(dump):  # a pydantic item (the SDK mostly passes TypedDict dicts)
        return dump(mode="json", exclude_unset=True)
    return item


def _model_name(agent: Any, default: str) -> str:
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else default


class ModelInputGuard:
    """A ``call_model_input_filter`` that observes each model input with its session's guard
    and returns it unchanged. ``sessions`` holds the guards and every outcome."""

    def __init__(
        self,
        guard: GuardLike | GuardSessions | None = None,
        *,
        session: Callable[[Any], str] | None = None,
        model: str = "agent",
    ) -> None:
        self.sessions = guard if isinstance(guard, GuardSessions) else GuardSessions(guard)
        self._session = session
        self._model = model

    def body(self, data: Any) -> dict[str, Any]:
        """The Responses body this model input amounts to."""
        model_data = data.model_data
        body: dict[str, Any] = {
            "model": _model_name(data.agent, self._model),
            "input": [_jsonable(item) for item in model_data.input],
        }
        if model_data.instructions:
            body["instructions"] = model_data.instructions
        return body

    def __call__(self, data: Any) -> Any:
        body = self.body(data)
        key = self._session(data) if self._session is not None else getattr(data.agent, "name", "")
        self.sessions.observe(body, {"x-kvlint-routing-key": key} if key else None)
        return data.model_data


def guard_model_input(
    guard: GuardLike | GuardSessions | None = None,
    *,
    session: Callable[[Any], str] | None = None,
    model: str = "agent",
) -> ModelInputGuard:
    """A ``RunConfig.call_model_input_filter`` that guards every model input.

    ``guard``: a Guard, a factory (one guard per session), or None (warn mode). ``session``:
    ``CallModelData -> str``, the session key; by default the agent's name (so a handoff
    starts a new session: its instructions differ). In error mode a break raises
    :class:`~kvlint_cache.GuardError` out of ``Runner.run``, before the model is called.
    """
    return ModelInputGuard(guard, session=session, model=model)


def chat_completions_model(
    model: str,
    *,
    base_url: str,
    api_key: str = "none",
    guard: GuardLike | GuardSessions | None = None,
    **client_kwargs: Any,
) -> Any:
    """An ``OpenAIChatCompletionsModel`` talking to ``base_url`` (``…/v1``) through an
    ``AsyncOpenAI`` whose HTTP client guards each request body (``client.kvlint_guard``)."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    from kvlint_cache.openai import guard_async_http_client

    http_client = guard_async_http_client(guard, **client_kwargs)
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=http_client)
    return OpenAIChatCompletionsModel(model=model, openai_client=client)
