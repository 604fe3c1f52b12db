//! The SDK's `Conversation` for Python: the tiers a prompt is assembled from, the history,
//! compaction, and each API's body, with what each change does to the cached prefix.

use kvlint_sdk::{Change, ChangeReport, Effect, Part, Tool, ToolCall};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use super::{conversation_error, to_python, to_value, warn};

/// What an `add_*` call did.
#[pyclass(frozen, get_all, module = "kvlint_cache._kvlint")]
pub(crate) struct TierChange {
    /// In the prompt from the next body on.
    applied: bool,
    /// Waiting for the next compaction: the prefix is committed.
    deferred: bool,
    /// Blocks of the current prefix the deferred change recomputes when applied.
    cost_blocks: usize,
    /// Volatile values found: dicts with `tier`, `class`, `value`, `rule`, `code`.
    volatile: Py<PyAny>,
}

#[pymethods]
impl TierChange {
    fn __bool__(&self) -> bool {
        self.applied
    }

    fn __repr__(&self) -> String {
        format!(
            "TierChange(applied={}, deferred={}, cost_blocks={})",
            self.applied, self.deferred, self.cost_blocks
        )
    }
}

/// A change refused raises; a deferred one or a volatile value warns at the caller's line.
fn accepted(py: Python<'_>, change: Change<'_>) -> PyResult<ChangeReport> {
    let report = change.into_result().map_err(conversation_error)?;
    if let Effect::Deferred {
        change,
        lost_blocks,
    } = &report.effect
    {
        warn(
            py,
            &format!(
                "{change} after the first request: {}, which recomputes {lost_blocks} cached block(s) (strict=True refuses it)",
                change.until_compaction()
            ),
        )?;
    }
    for found in &report.volatile {
        warn(
            py,
            &format!(
                "{} tier: {} `{}` changes from request to request and breaks the cache after it ({}); put it in add_turn_context",
                found.tier, found.class, found.value, found.rule
            ),
        )?;
    }
    Ok(report)
}

fn tier_change(py: Python<'_>, change: Change<'_>) -> PyResult<TierChange> {
    let report = accepted(py, change)?;
    let (deferred, cost_blocks) = match report.effect {
        Effect::Deferred { lost_blocks, .. } => (true, lost_blocks),
        Effect::Applied | Effect::Unchanged => (false, 0),
    };
    Ok(TierChange {
        applied: !deferred,
        deferred,
        cost_blocks,
        volatile: to_python(py, &report.volatile)?.unbind(),
    })
}

/// A compaction that kept more than asked says so at the call.
fn warn_kept_beyond_asked(py: Python<'_>, cache_break: &kvlint_sdk::CacheBreak) -> PyResult<()> {
    match cache_break.kept_beyond_asked {
        0 => Ok(()),
        extra => warn(
            py,
            &format!(
                "compaction kept {extra} message(s) more than asked: no user message follows the cut, and a history that starts with the assistant is rejected (Anthropic, Bedrock)"
            ),
        ),
    }
}

/// Parts from a string, or from blocks in any API's shape ([`Part::from_content`]).
fn parts(content: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<Part>> {
    Part::from_content(&to_value(content, name)?).map_err(conversation_error)
}

/// One agent session in stability tiers, with an append-only history.
#[pyclass(module = "kvlint_cache._kvlint")]
#[derive(Clone)]
pub(crate) struct Conversation {
    inner: kvlint_sdk::Conversation,
}

#[pymethods]
impl Conversation {
    #[new]
    #[pyo3(signature = (*, strict = false))]
    fn new(strict: bool) -> Self {
        let inner = if strict {
            kvlint_sdk::Conversation::strict()
        } else {
            kvlint_sdk::Conversation::new()
        };
        Self { inner }
    }

    #[getter]
    fn is_strict(&self) -> bool {
        self.inner.is_strict()
    }

    fn add_static(&mut self, py: Python<'_>, text: &str) -> PyResult<TierChange> {
        tier_change(py, self.inner.add_static(text))
    }

    fn add_session(&mut self, py: Python<'_>, key: &str, text: &str) -> PyResult<TierChange> {
        tier_change(py, self.inner.add_session(key, text))
    }

    fn add_tool(&mut self, py: Python<'_>, definition: &Bound<'_, PyAny>) -> PyResult<TierChange> {
        let tool = Tool::from_definition(&to_value(definition, "definition")?)
            .map_err(conversation_error)?;
        tier_change(py, self.inner.add_tool(tool))
    }

    fn add_turn_context(&mut self, text: &str) {
        self.inner.add_turn_context(text);
    }

    fn clear_turn_context(&mut self) {
        self.inner.clear_turn_context();
    }

    fn push_user(&mut self, py: Python<'_>, content: &Bound<'_, PyAny>) -> PyResult<()> {
        let parts = parts(content, "content")?;
        accepted(py, self.inner.push_user_parts(parts)).map(drop)
    }

    #[pyo3(signature = (text = "", tool_calls = None, *, thinking = None))]
    fn push_assistant(
        &mut self,
        py: Python<'_>,
        text: &str,
        tool_calls: Option<&Bound<'_, PyAny>>,
        thinking: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let calls = match tool_calls {
            Some(calls) => match to_value(calls, "tool_calls")? {
                Value::Array(calls) => calls
                    .iter()
                    .map(|call| ToolCall::from_json(call).map_err(conversation_error))
                    .collect::<PyResult<_>>()?,
                _ => return Err(conversation_error("tool_calls: expected a list")),
            },
            None => Vec::new(),
        };
        let mut answer = match thinking {
            Some(blocks) => parts(blocks, "thinking")?,
            None => Vec::new(),
        };
        if !text.is_empty() {
            answer.push(Part::text(text));
        }
        accepted(py, self.inner.push_assistant_parts(answer, calls)).map(drop)
    }

    fn push_tool_result(
        &mut self,
        py: Python<'_>,
        call_id: &str,
        content: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let parts = parts(content, "content")?;
        accepted(py, self.inner.push_tool_result_parts(call_id, parts)).map(drop)
    }

    fn push_openai_response(
        &mut self,
        py: Python<'_>,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let response = to_value(response, "response")?;
        accepted(py, self.inner.push_openai_response(&response)).map(drop)
    }

    fn push_responses_output(
        &mut self,
        py: Python<'_>,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let response = to_value(response, "response")?;
        accepted(py, self.inner.push_responses_output(&response)).map(drop)
    }

    fn push_anthropic_response(
        &mut self,
        py: Python<'_>,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let response = to_value(response, "response")?;
        accepted(py, self.inner.push_anthropic_response(&response)).map(drop)
    }

    #[staticmethod]
    fn from_body(body: &Bound<'_, PyAny>) -> PyResult<Self> {
        let inner = kvlint_sdk::Conversation::from_body(&to_value(body, "body")?)
            .map_err(conversation_error)?;
        Ok(Self { inner })
    }

    fn to_openai_chat<'py>(&self, py: Python<'py>, model: &str) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.to_openai_chat(model))
    }

    fn to_openai_responses<'py>(
        &self,
        py: Python<'py>,
        model: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.to_openai_responses(model))
    }

    #[pyo3(signature = (model, *, max_tokens = kvlint_sdk::ANTHROPIC_DEFAULT_MAX_TOKENS))]
    fn to_anthropic<'py>(
        &self,
        py: Python<'py>,
        model: &str,
        max_tokens: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut body = self.inner.to_anthropic(model);
        body["max_tokens"] = Value::from(max_tokens);
        to_python(py, &body)
    }

    fn preview(&self) -> Self {
        Self {
            inner: self.inner.preview(),
        }
    }

    #[pyo3(signature = (keep_last, *, summary = None))]
    fn compact<'py>(
        &mut self,
        py: Python<'py>,
        keep_last: usize,
        summary: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache_break = match summary {
            Some(summary) => self.inner.compact_with_summary(keep_last, summary),
            None => self.inner.compact(keep_last),
        };
        warn_kept_beyond_asked(py, &cache_break)?;
        to_python(py, &cache_break)
    }

    fn enforce_window<'py>(
        &mut self,
        py: Python<'py>,
        max_messages: usize,
        keep_messages: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let window = kvlint_sdk::HistoryWindow::new(max_messages, keep_messages);
        self.inner
            .enforce_window(&window)
            .map(|cache_break| {
                warn_kept_beyond_asked(py, &cache_break)?;
                to_python(py, &cache_break)
            })
            .transpose()
    }

    #[getter]
    fn routing_key(&self) -> String {
        self.inner.routing_key()
    }

    fn routing_headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let headers = PyDict::new(py);
        for (name, value) in self.inner.routing_headers() {
            headers.set_item(name, value)?;
        }
        Ok(headers)
    }

    #[getter]
    fn is_committed(&self) -> bool {
        self.inner.is_committed()
    }

    #[getter]
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.history())
    }

    #[getter]
    fn pending_changes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.pending_changes())
    }

    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|error| PyValueError::new_err(error.to_string()))
    }

    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let inner = serde_json::from_str(text)
            .map_err(|error| conversation_error(format!("not a saved conversation: {error}")))?;
        Ok(Self { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "Conversation({} message(s), committed={}, strict={})",
            self.inner.history().len(),
            self.inner.is_committed(),
            self.inner.is_strict()
        )
    }
}
