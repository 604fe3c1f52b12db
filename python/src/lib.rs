//! `kvlint_cache._kvlint`: the Python module of the `kvlint-cache` package.
//!
//! A thin binding: each class and function wraps the Rust one it names ([`kvlint_sdk`]'s
//! `Conversation` and `Guard`, [`kvlint_rules::check_session`], [`kvlint::run`]); request
//! bodies, responses and tool definitions cross as plain Python objects (dicts, lists,
//! strings) through `pythonize`, in their key order. The Python API is documented in
//! `kvlint_cache/_kvlint.pyi`.
//!
//! Mistakes are reported at the call that makes them: an input the provider would reject,
//! or (strict mode) a change to a committed tier, raises `ConversationError`; in the default
//! mode a deferred change or a volatile value in a cached tier is a `CacheWarning` issued at
//! the caller's line.

mod conversation;
mod sessions;
mod workload;

use std::ffi::CString;
use std::sync::Arc;

use kvlint_core::session::SessionFile;
use kvlint_render::render::Renderer;
use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_sdk::GuardMode;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyIndexError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyList, PySet, PyTuple};
use pythonize::{depythonize, pythonize};
use serde::Serialize;
use serde_json::Value;

create_exception!(
    kvlint_cache._kvlint,
    ConversationError,
    PyValueError,
    "An input the provider would reject, or a change a strict Conversation refuses."
);
create_exception!(
    kvlint_cache._kvlint,
    GuardError,
    PyException,
    "Guard(mode=\"error\") refusing a request that recomputes cached content; `findings` holds the turn's findings."
);
create_exception!(
    kvlint_cache._kvlint,
    CacheWarning,
    PyUserWarning,
    "A mistake that does not stop the call: issued at the call that made it."
);

fn conversation_error(error: impl std::fmt::Display) -> PyErr {
    ConversationError::new_err(error.to_string())
}

/// JSON data from a Python object. A `set` anywhere in it is refused: it iterates in hash
/// order, which for strings changes with the process's hash seed (`PYTHONHASHSEED`), so the
/// same conversation rebuilt in another process would send other bytes. Sorting it instead
/// would need an order for values of mixed types that JSON does not give; the caller knows
/// which order it means.
fn to_value(object: &Bound<'_, PyAny>, name: &str) -> PyResult<Value> {
    refuse_sets(object, name)?;
    depythonize(object).map_err(|error| PyValueError::new_err(format!("not JSON data: {error}")))
}

fn refuse_sets(object: &Bound<'_, PyAny>, path: &str) -> PyResult<()> {
    if object.is_instance_of::<PySet>() || object.is_instance_of::<PyFrozenSet>() {
        return Err(conversation_error(format!(
            "`{path}`: a Python set has no order: it is serialized in hash-seed order, so another process sends other bytes and the cache breaks; pass a sorted list"
        )));
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        for (key, value) in dict.iter() {
            refuse_sets(&value, &format!("{path}[{}]", key.repr()?))?;
        }
    } else if let Ok(list) = object.cast::<PyList>() {
        for (index, item) in list.iter().enumerate() {
            refuse_sets(&item, &format!("{path}[{index}]"))?;
        }
    } else if let Ok(tuple) = object.cast::<PyTuple>() {
        for (index, item) in tuple.iter().enumerate() {
            refuse_sets(&item, &format!("{path}[{index}]"))?;
        }
    }
    Ok(())
}

fn to_python<'py>(py: Python<'py>, value: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
    pythonize(py, value).map_err(|error| PyValueError::new_err(error.to_string()))
}

fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let message = CString::new(message.replace('\0', " "))?;
    // Level 1: the Python line that called into this module.
    PyErr::warn(py, &py.get_type::<CacheWarning>(), &message, 1)
}

/// One diagnostic, as `kvlint check` reports it.
#[pyclass(frozen, get_all, module = "kvlint_cache._kvlint")]
#[derive(Clone)]
struct Finding {
    rule: String,
    code: String,
    severity: String,
    message: String,
    help: String,
    turn: usize,
    tokens_lost: usize,
    part: Option<String>,
}

#[pymethods]
impl Finding {
    fn __repr__(&self) -> String {
        format!(
            "Finding({} {} turn {}: {})",
            self.code, self.severity, self.turn, self.message
        )
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(
            py,
            &serde_json::json!({
                "rule": self.rule, "code": self.code, "severity": self.severity,
                "message": self.message, "help": self.help, "turn": self.turn,
                "tokens_lost": self.tokens_lost, "part": self.part,
            }),
        )
    }
}

impl From<&Diagnostic> for Finding {
    fn from(diagnostic: &Diagnostic) -> Self {
        let part = diagnostic.part.to_string();
        Self {
            rule: diagnostic.rule.to_owned(),
            code: diagnostic.code.to_owned(),
            severity: diagnostic.severity.as_str().to_owned(),
            message: diagnostic.message.clone(),
            help: diagnostic.help.clone(),
            turn: diagnostic.turn,
            tokens_lost: diagnostic.tokens_lost,
            part: (!part.is_empty()).then_some(part),
        }
    }
}

fn findings(diagnostics: &[Diagnostic]) -> Vec<Finding> {
    diagnostics.iter().map(Finding::from).collect()
}

fn of_severity(findings: &[Finding], severity: Severity) -> Vec<Finding> {
    findings
        .iter()
        .filter(|finding| finding.severity == severity.as_str())
        .cloned()
        .collect()
}

/// The findings of a session ([`check`]) or of one turn ([`Guard::observe`]).
#[pyclass(frozen, subclass, sequence, module = "kvlint_cache._kvlint")]
#[derive(Clone)]
struct Outcome {
    #[pyo3(get)]
    findings: Vec<Finding>,
}

#[pymethods]
impl Outcome {
    /// No error and no warning (infos are costs by design).
    fn is_clean(&self) -> bool {
        self.findings
            .iter()
            .all(|finding| finding.severity == Severity::Info.as_str())
    }

    fn errors(&self) -> Vec<Finding> {
        of_severity(&self.findings, Severity::Error)
    }

    fn warnings(&self) -> Vec<Finding> {
        of_severity(&self.findings, Severity::Warning)
    }

    /// The previous turn's per-turn tail, dropped by design: info findings with their tokens.
    fn costs(&self) -> Vec<Finding> {
        of_severity(&self.findings, Severity::Info)
    }

    #[getter]
    fn tokens_lost(&self) -> usize {
        self.findings
            .iter()
            .map(|finding| finding.tokens_lost)
            .sum()
    }

    fn __len__(&self) -> usize {
        self.findings.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<Finding> {
        let length = self.findings.len() as isize;
        let index = if index < 0 { index + length } else { index };
        usize::try_from(index)
            .ok()
            .and_then(|index| self.findings.get(index))
            .cloned()
            .ok_or_else(|| PyIndexError::new_err("finding index out of range"))
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.findings.clone())?
            .as_any()
            .try_iter()?
            .into_any())
    }

    fn __repr__(&self) -> String {
        format!("Outcome({} finding(s))", self.findings.len())
    }
}

/// The result of [`check`]: the session's findings and token counts.
#[pyclass(frozen, extends = Outcome, module = "kvlint_cache._kvlint")]
struct Report {
    #[pyo3(get)]
    prompt_tokens: usize,
    #[pyo3(get)]
    reused_tokens: usize,
}

#[pymethods]
impl Report {
    fn to_dict<'py>(self_: PyRef<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let outcome: &Outcome = self_.as_super();
        let findings: Vec<Bound<'py, PyAny>> = outcome
            .findings
            .iter()
            .map(|finding| finding.to_dict(py))
            .collect::<PyResult<_>>()?;
        let dict = PyDict::new(py);
        dict.set_item("findings", findings)?;
        dict.set_item("prompt_tokens", self_.prompt_tokens)?;
        dict.set_item("reused_tokens", self_.reused_tokens)?;
        Ok(dict.into_any())
    }
}

/// Checks one session: the request bodies an agent sent, in order, in provider mode (the
/// order hosted APIs cache in, tokenized with `o200k_base`).
#[pyfunction]
fn check(py: Python<'_>, bodies: &Bound<'_, PyAny>) -> PyResult<Py<Report>> {
    let bodies: Vec<Value> = to_value(bodies, "bodies").and_then(|value| match value {
        Value::Array(bodies) => Ok(bodies),
        _ => Err(PyValueError::new_err(
            "bodies: expected a list of request bodies",
        )),
    })?;
    if bodies.is_empty() {
        let nothing = Outcome {
            findings: Vec::new(),
        };
        return Py::new(
            py,
            (
                Report {
                    prompt_tokens: 0,
                    reused_tokens: 0,
                },
                nothing,
            ),
        );
    }
    let lines: String = bodies.iter().map(|body| format!("{body}\n")).collect();
    let session =
        SessionFile::parse("bodies".into(), Arc::from(lines)).map_err(conversation_error)?;
    let checked = kvlint_rules::check_sent_session(&session).map_err(conversation_error)?;
    let report = Report {
        prompt_tokens: checked.prompt_tokens(),
        reused_tokens: checked.reused_tokens(),
    };
    let outcome = Outcome {
        findings: findings(&checked.findings),
    };
    Py::new(py, (report, outcome))
}

/// `kvlint check` on each pair of turns of one session, as the requests are sent.
#[pyclass(module = "kvlint_cache._kvlint")]
struct Guard {
    inner: kvlint_sdk::Guard,
    /// Every finding of the accepted and refused turns, in order.
    seen: Vec<Finding>,
}

#[pymethods]
impl Guard {
    #[new]
    #[pyo3(signature = (*, mode = "warn"))]
    fn new(mode: &str) -> PyResult<Self> {
        let mode = match mode {
            "warn" => GuardMode::Warn,
            "error" => GuardMode::Error,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode: expected \"warn\" or \"error\", got {other:?}"
                )));
            }
        };
        Ok(Self {
            inner: kvlint_sdk::Guard::new(Renderer::provider(), mode),
            seen: Vec::new(),
        })
    }

    #[getter]
    fn mode(&self) -> &'static str {
        match self.inner.mode() {
            GuardMode::Warn => "warn",
            GuardMode::Error => "error",
        }
    }

    /// Every finding so far, in order (refused turns included).
    #[getter]
    fn findings(&self) -> Vec<Finding> {
        self.seen.clone()
    }

    fn observe(&mut self, py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<Outcome> {
        self.observe_value(py, to_value(body, "body")?)
    }

    fn expect_break(&mut self) {
        self.inner.expect_break();
    }

    #[getter]
    fn is_break_expected(&self) -> bool {
        self.inner.is_break_expected()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    #[getter]
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let counters = to_python(py, self.inner.counters())?;
        counters.set_item("costs_by_rule", to_python(py, self.inner.costs_by_rule())?)?;
        Ok(counters)
    }

    /// Shows the guard the API's response (a dict) to the last request: the cache usage it
    /// reports is summed in `reported_usage`. False when it reports none.
    fn observe_response(&mut self, response: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self
            .inner
            .observe_response(&to_value(response, "response")?))
    }

    /// The cache usage the API reported for the responses shown, summed: `responses`,
    /// `input_tokens` (cached ones included), `cache_read_input_tokens`,
    /// `cache_creation_input_tokens`.
    #[getter]
    fn reported_usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.reported_usage())
    }

    /// The same under OpenTelemetry's GenAI attribute names (`gen_ai.usage.input_tokens`,
    /// `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`),
    /// to set on a span or export as counters.
    fn otel_attributes(&self) -> std::collections::BTreeMap<&'static str, usize> {
        self.inner
            .reported_usage()
            .otel_attributes()
            .into_iter()
            .collect()
    }
}

impl Guard {
    /// [`Guard::observe`] on a body read already.
    fn observe_value(&mut self, py: Python<'_>, body: Value) -> PyResult<Outcome> {
        match self.inner.observe_body(body) {
            Ok(observed) => {
                let findings = findings(&observed);
                self.seen.extend(findings.iter().cloned());
                Ok(Outcome { findings })
            }
            Err(kvlint_sdk::GuardError::Breaks { diagnostics, turn }) => {
                let refused = findings(&diagnostics);
                self.seen.extend(refused.iter().cloned());
                let first = refused
                    .first()
                    .map_or("", |finding| finding.message.as_str());
                let error = GuardError::new_err(format!(
                    "turn {turn}: {} cache break(s) recompute cached tokens; first: {first}",
                    refused.len()
                ));
                error.value(py).setattr("findings", refused)?;
                Err(error)
            }
            Err(error) => Err(conversation_error(format!("{error}"))),
        }
    }
}

/// The session a request belongs to, from its body and headers (name, value): the first of
/// [`kvlint_protocol::key::SESSION_KEY`] it carries; `""` when none.
#[pyfunction]
#[pyo3(signature = (body, headers = Vec::new()))]
fn session_key(body: &Bound<'_, PyAny>, headers: Vec<(String, String)>) -> PyResult<String> {
    let body = to_value(body, "body")?;
    Ok(kvlint_protocol::key::session_key_of(&body, &headers))
}

/// Whether a body opens a conversation: one user message and no answer yet
/// ([`kvlint_protocol::key::opens_conversation`]).
#[pyfunction]
fn opens_conversation(body: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(kvlint_protocol::key::opens_conversation(&to_value(
        body, "body",
    )?))
}

/// Runs the `kvlint` command line (`argv[0]` is the program's name); returns the exit code.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| kvlint::run(argv))
}

#[pymodule]
fn _kvlint(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add("ROUTING_KEY_HEADER", kvlint_sdk::ROUTING_KEY_HEADER)?;
    module.add("SUMMARY_SESSION_KEY", kvlint_sdk::SUMMARY_SESSION_KEY)?;
    module.add(
        "PROMPT_PATHS",
        pyo3::types::PyTuple::new(py, kvlint_protocol::endpoint::PROMPT_PATHS)?,
    )?;
    module.add("ConversationError", py.get_type::<ConversationError>())?;
    module.add("GuardError", py.get_type::<GuardError>())?;
    module.add("CacheWarning", py.get_type::<CacheWarning>())?;
    module.add_class::<Finding>()?;
    module.add_class::<Outcome>()?;
    module.add_class::<Report>()?;
    module.add_class::<conversation::TierChange>()?;
    module.add_class::<conversation::Conversation>()?;
    module.add_class::<Guard>()?;
    module.add_class::<sessions::GuardSessions>()?;
    module.add(
        "TRACE_ROW_COLUMNS",
        pyo3::types::PyTuple::new(py, workload::COLUMNS)?,
    )?;
    module.add_class::<workload::Workload>()?;
    module.add_function(wrap_pyfunction!(workload::trace_rows, module)?)?;
    module.add_function(wrap_pyfunction!(check, module)?)?;
    module.add_function(wrap_pyfunction!(run_cli, module)?)?;
    module.add_function(wrap_pyfunction!(session_key, module)?)?;
    module.add_function(wrap_pyfunction!(opens_conversation, module)?)?;
    Ok(())
}
