//! One [`Guard`] per session for the guarded clients (`kvlint_cache._http.GuardSessions`):
//! the SDK's multiplexer ([`kvlint_sdk::GuardSessions`]) over the Python guards, so that the
//! session key, the first-turn reset, the announced breaks, the retry rule and the bounds on
//! sessions and kept bodies are the SDK's, not restated in Python.

use std::sync::Arc;

use kvlint_sdk::{Observed, SessionGuard, SessionLimits};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::Value;

use super::{Guard, Outcome, to_python, to_value};

/// A Python [`Guard`] as the multiplexer holds it (the application may hold it too).
struct SharedGuard(Py<Guard>);

impl SessionGuard for SharedGuard {
    type Outcome = Outcome;
    type Error = Arc<PyErr>;

    fn observe(&mut self, body: Value) -> Result<Outcome, Arc<PyErr>> {
        Python::attach(|py| self.0.try_borrow_mut(py)?.observe_value(py, body)).map_err(Arc::new)
    }

    fn has_breaks(outcome: &Outcome) -> bool {
        !outcome.errors().is_empty()
    }

    // The interpreter is held through a whole observation (as `Guard.observe` holds it), so
    // no other thread uses the guard meanwhile; a guard in use further up this thread's stack
    // reads as not expecting a break and is not reset.
    fn is_break_expected(&self) -> bool {
        Python::attach(|py| {
            self.0
                .try_borrow(py)
                .is_ok_and(|guard| guard.inner.is_break_expected())
        })
    }

    fn expected_breaks(&self) -> usize {
        Python::attach(|py| {
            self.0
                .try_borrow(py)
                .map_or(0, |guard| guard.inner.counters().expected_breaks)
        })
    }

    fn reset(&mut self) {
        Python::attach(|py| {
            if let Ok(mut guard) = self.0.try_borrow_mut(py) {
                guard.inner.reset();
            }
        });
    }

    fn observe_response(&mut self, response: &Value) -> bool {
        Python::attach(|py| {
            self.0
                .try_borrow_mut(py)
                .is_ok_and(|mut guard| guard.inner.observe_response(response))
        })
    }
}

/// One guard per session key, bounded: `guard` is one Guard for every session, a factory
/// called once per session, or `None` (a warn-mode Guard per session).
#[pyclass(module = "kvlint_cache._kvlint")]
pub(crate) struct GuardSessions {
    inner: kvlint_sdk::GuardSessions<SharedGuard>,
}

#[pymethods]
impl GuardSessions {
    #[new]
    #[pyo3(signature = (guard = None, *, max_sessions = 10_000, keep_bodies = 1_000))]
    fn new(
        guard: Option<&Bound<'_, PyAny>>,
        max_sessions: usize,
        keep_bodies: usize,
    ) -> PyResult<Self> {
        if max_sessions == 0 || keep_bodies == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "max_sessions and keep_bodies must be at least 1",
            ));
        }
        let limits = SessionLimits {
            sessions: max_sessions,
            bodies: keep_bodies,
        };
        let inner = match guard {
            Some(guard) if guard.is_instance_of::<Guard>() => {
                kvlint_sdk::GuardSessions::single(SharedGuard(guard.extract()?), limits)
            }
            Some(factory) if factory.is_callable() => {
                let factory = factory.clone().unbind();
                kvlint_sdk::GuardSessions::per_session(
                    move || {
                        Python::attach(|py| {
                            let made = factory.call0(py)?;
                            made.extract::<Py<Guard>>(py).map_err(|_| {
                                PyTypeError::new_err(
                                    "the guard factory must return a kvlint_cache.Guard",
                                )
                            })
                        })
                        .map(SharedGuard)
                        .map_err(Arc::new)
                    },
                    limits,
                )
            }
            Some(_) => {
                return Err(PyTypeError::new_err(
                    "guard: expected a Guard, a function returning one, or None",
                ));
            }
            None => kvlint_sdk::GuardSessions::per_session(
                || {
                    Python::attach(|py| Py::new(py, Guard::new("warn")?))
                        .map(SharedGuard)
                        .map_err(Arc::new)
                },
                limits,
            ),
        };
        Ok(Self { inner })
    }

    /// Observes `body` (sent with `headers`, as the client's attempt `retry`) with the guard
    /// of its session (`key`, else the one the body and headers carry). Returns the outcome
    /// and whether it holds a break the application did not announce; `None` for a retry not
    /// observed again. A refusal, or a retry of the body refused, raises the guard's error.
    #[pyo3(signature = (body, headers = Vec::new(), *, key = None, retry = 0))]
    fn observe(
        &mut self,
        py: Python<'_>,
        body: &Bound<'_, PyAny>,
        headers: Vec<(String, String)>,
        key: Option<String>,
        retry: u32,
    ) -> PyResult<Option<(Outcome, bool)>> {
        let body = to_value(body, "body")?;
        let observed = match key {
            Some(key) => self.inner.observe_as(key, body, retry),
            None => self.inner.observe(body, &headers, retry),
        };
        observed
            .map(|observed| checked(&observed))
            .map_err(|error| error.clone_ref(py))
    }

    /// Shows the guard of the session `body` (sent with `headers`) belongs to the API's
    /// `response` to it; False when the session is not kept or the response reported no
    /// cache usage.
    #[pyo3(signature = (body, response, headers = Vec::new()))]
    fn observe_response(
        &mut self,
        body: &Bound<'_, PyAny>,
        response: &Bound<'_, PyAny>,
        headers: Vec<(String, String)>,
    ) -> PyResult<bool> {
        let body = to_value(body, "body")?;
        let response = to_value(response, "response")?;
        Ok(self.inner.observe_response(&body, &headers, &response))
    }

    /// The guard of session `key` (made when the session is new).
    fn guard_for(&mut self, py: Python<'_>, key: &str) -> PyResult<Py<Guard>> {
        match self.inner.guard_for(key) {
            Ok(guard) => Ok(guard.0.clone_ref(py)),
            Err(error) => Err(error.clone_ref(py)),
        }
    }

    /// The sessions kept and their guards, least recently used first.
    #[getter]
    fn guards<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let guards = PyDict::new(py);
        for (key, guard) in self.inner.guards() {
            guards.set_item(key, guard.0.clone_ref(py))?;
        }
        Ok(guards)
    }

    /// The latest bodies observed (`keep_bodies` of them), each `(key, body, outcome)`.
    #[getter]
    fn observed<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let observed = PyList::empty(py);
        for entry in self.inner.observed() {
            let body = to_python(py, &entry.body)?;
            let outcome = Py::new(py, entry.outcome.clone())?;
            observed.append(PyTuple::new(
                py,
                [
                    entry.key.clone().into_pyobject(py)?.into_any(),
                    body,
                    outcome.into_bound(py).into_any(),
                ],
            )?)?;
        }
        Ok(observed)
    }

    #[getter]
    fn max_sessions(&self) -> usize {
        self.inner.limits().sessions
    }

    #[getter]
    fn keep_bodies(&self) -> usize {
        self.inner.limits().bodies
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

fn checked(observed: &Observed<'_, Outcome>) -> Option<(Outcome, bool)> {
    match observed {
        Observed::Checked { body, warn } => Some((body.outcome.clone(), *warn)),
        Observed::Retry => None,
    }
}
