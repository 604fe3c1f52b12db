//! The workload's map and reduce steps for distributed engines (`kvlint_cache.workload`):
//! `trace_rows` traces a batch of files into one row per request, column by column, with the
//! workload's one assembly ([`kvlint_workload::WorkloadInputs::rows`]); `Workload.from_rows` joins rows from any number
//! of workers back into the trace `kvlint workload` builds, for its report and its hashed
//! trace. A file that cannot be read or traced becomes one row with its `error`: a bad file
//! never stops the job, and the rows read always add up.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::session::SessionFile;
use kvlint_fleet::Trace;
use kvlint_fleet::hashed_trace::{HashedFormat, export_hashed};
use kvlint_protocol::EngineName;
use kvlint_recordings::log::{RowFilter, read_log_bytes};
use kvlint_render::{Renderer, RendererSetup, SERVING_ENGINES};
use kvlint_workload::html::workload_html;
use kvlint_workload::rows::{TraceRow, trace_of_rows};
use kvlint_workload::{
    InputFile, LoggedSession, MappedRow, WorkloadInputs, failed_row, workload_report,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// The columns of the map step's rows, in order: what `trace_rows` returns and
/// `Workload.from_rows` reads.
pub const COLUMNS: [&str; 17] = [
    "file",
    "session",
    "identity",
    "turn",
    "time",
    "input_length",
    "output_length",
    "shared_with_previous",
    "shared_with_previous_sequence",
    "previous_input_tokens",
    "kept_blocks",
    "hash_ids",
    "generated_hash_ids",
    "finding",
    "block_size",
    "renderer",
    "error",
];

/// Traces the files `names[i]` (relative to the workload's folder, as `kvlint workload`
/// names them) with contents `contents[i]` (bytes or text; gzip is inflated) into rows,
/// as columns. With `log`, each content is a request log's rows (JSON Lines, plain, gzip or
/// zstd) holding every row of the session keys it holds, grouped into sessions as
/// `kvlint workload --log` groups them; a row not traced (bad, or no prompt) is a row with its
/// `error`.
#[pyfunction]
#[pyo3(signature = (names, contents, *, block_size = 16, tokenizer = None, chat_template = None, serving_engine = "vllm", log = false))]
#[allow(clippy::too_many_arguments)]
pub fn trace_rows<'py>(
    py: Python<'py>,
    names: Vec<String>,
    contents: Vec<Bound<'py, PyAny>>,
    block_size: u32,
    tokenizer: Option<PathBuf>,
    chat_template: Option<PathBuf>,
    serving_engine: &str,
    log: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if names.len() != contents.len() {
        return Err(PyValueError::new_err(format!(
            "{} names for {} contents",
            names.len(),
            contents.len()
        )));
    }
    if block_size == 0 {
        return Err(PyValueError::new_err("block_size must be at least 1"));
    }
    let renderer = workload_renderer(tokenizer, chat_template, serving_engine)?;
    let mut inputs_read = Vec::with_capacity(contents.len());
    for (name, content) in names.into_iter().zip(&contents) {
        let bytes = match content.cast::<PyBytes>() {
            Ok(bytes) => bytes.as_bytes().to_vec(),
            Err(_) => content.extract::<String>()?.into_bytes(),
        };
        inputs_read.push((name, bytes));
    }
    let rows =
        py.detach(|| {
            let mut inputs = WorkloadInputs::default();
            // A log's rows not traced (bad, or no prompt), before the rows of its sessions.
            let mut rows = Vec::new();
            for (name, bytes) in inputs_read {
                if log {
                    let logged = inputs.logged.get_or_insert_with(Vec::new);
                    logged.extend(log_sessions(&name, &bytes, &mut rows).into_iter().map(
                        |session| LoggedSession {
                            session,
                            name: name.clone(),
                        },
                    ));
                } else {
                    inputs.files.push(InputFile {
                        name: name.clone(),
                        relative: name,
                        bytes,
                    });
                }
            }
            rows.extend(inputs.rows(&renderer, block_size, |name, bytes| {
                kvlint_recordings::input_text(name.clone(), bytes)
                    .and_then(|text| kvlint_recordings::parse_all(name, Arc::from(text)))
            }));
            rows
        });
    columns(py, rows)
}

/// The renderer `kvlint workload` builds from `--tokenizer`, `--chat-template` and
/// `--serving-engine` (`vllm`, `sglang`, `llama.cpp`), so that the map step traces sessions
/// exactly as the command does: the embedded o200k_base without either file.
fn workload_renderer(
    tokenizer: Option<PathBuf>,
    chat_template: Option<PathBuf>,
    serving_engine: &str,
) -> PyResult<Renderer> {
    let serving = EngineName::from_name(serving_engine)
        .filter(|engine| SERVING_ENGINES.contains(engine))
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown serving engine `{serving_engine}`: vllm, sglang or llama.cpp"
            ))
        })?;
    let mut setup = RendererSetup::new(chrono::Local::now().naive_local());
    setup.tokenizer = tokenizer;
    setup.chat_template = chat_template;
    setup.serving = serving;
    setup
        .renderer()
        .map_err(|error| PyValueError::new_err(error.to_string()))
}

/// The sessions of the log rows `bytes` (named `name`), grouped as `kvlint workload --log`
/// groups them; the rows not traced go to `rows` as rows with their `error`: each bad row
/// placed (the first [`kvlint_recordings::log::BAD_ROWS_KEPT`]), then one for the bad rows
/// beyond those and one for the rows that are no prompts, with their counts.
fn log_sessions(name: &str, bytes: &[u8], rows: &mut Vec<MappedRow>) -> Vec<SessionFile> {
    let read = read_log_bytes(name, bytes, &RowFilter::default());
    let summary = &read.summary;
    for bad in &summary.bad {
        let place = bad
            .row
            .map(|row| format!("row {row}: "))
            .unwrap_or_default();
        rows.push(failed_row(name, 0, format!("{place}{}", bad.reason)));
    }
    let placed: u64 = summary.bad.iter().map(|bad| bad.rows.max(1)).sum();
    let unplaced = (summary.rows_bad + summary.unreadable).saturating_sub(placed);
    if unplaced > 0 {
        rows.push(failed_row(name, 0, format!("{unplaced} more bad rows")));
    }
    if summary.rows_not_prompts > 0 {
        rows.push(failed_row(
            name,
            0,
            format!(
                "requests that take no prompt (embeddings, token counts): {} row{}",
                summary.rows_not_prompts,
                if summary.rows_not_prompts == 1 {
                    ""
                } else {
                    "s"
                }
            ),
        ));
    }
    read.sessions
}

fn columns<'py>(py: Python<'py>, rows: Vec<MappedRow>) -> PyResult<Bound<'py, PyDict>> {
    let lists: Vec<Bound<'py, PyList>> = COLUMNS.iter().map(|_| PyList::empty(py)).collect();
    for (row, error) in rows {
        let failed = error.is_some();
        let values: [Bound<'py, PyAny>; 17] = [
            row.file.into_pyobject(py)?.into_any(),
            row.session.into_pyobject(py)?.into_any(),
            row.identity.into_pyobject(py)?.into_any(),
            row.turn.into_pyobject(py)?.into_any(),
            row.time.into_pyobject(py)?.into_any(),
            row.input_length.into_pyobject(py)?.into_any(),
            row.output_length.into_pyobject(py)?.into_any(),
            row.shared_with_previous.into_pyobject(py)?.into_any(),
            row.shared_with_previous_sequence
                .into_pyobject(py)?
                .into_any(),
            row.previous_input_tokens.into_pyobject(py)?.into_any(),
            row.kept_blocks.into_pyobject(py)?.into_any(),
            PyList::new(py, row.hash_ids)?.into_any(),
            PyList::new(py, row.generated_hash_ids)?.into_any(),
            row.finding.into_pyobject(py)?.into_any(),
            (!failed)
                .then_some(row.block_size)
                .into_pyobject(py)?
                .into_any(),
            (!failed)
                .then_some(row.renderer)
                .into_pyobject(py)?
                .into_any(),
            error.into_pyobject(py)?.into_any(),
        ];
        for (list, value) in lists.iter().zip(values) {
            list.append(value)?;
        }
    }
    let dict = PyDict::new(py);
    for (name, list) in COLUMNS.iter().zip(lists) {
        dict.set_item(name, list)?;
    }
    Ok(dict)
}

/// A workload joined from the map step's rows.
#[pyclass(module = "kvlint_cache._kvlint", frozen)]
pub struct Workload {
    trace: Option<Trace>,
    rows: usize,
    errors: Vec<(String, u32, String)>,
}

impl Workload {
    fn trace(&self) -> PyResult<&Trace> {
        self.trace
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("no request was traced"))
    }
}

#[pymethods]
impl Workload {
    /// Joins rows, given as columns (a dict of lists as `trace_rows` returns them, a table's
    /// `to_pydict()`, a pandas frame): sessions are ordered as `kvlint workload` orders them, however
    /// the rows arrive.
    #[staticmethod]
    fn from_rows(py: Python<'_>, columns: &Bound<'_, PyAny>) -> PyResult<Self> {
        let column = |name: &str| -> PyResult<Vec<Bound<'_, PyAny>>> {
            let values = columns
                .get_item(name)
                .map_err(|_| PyValueError::new_err(format!("the rows have no column `{name}`")))?;
            values.try_iter()?.collect()
        };
        let mut read: HashMap<&str, Vec<Bound<'_, PyAny>>> = HashMap::new();
        for name in COLUMNS {
            read.insert(name, column(name)?);
        }
        let count = read["file"].len();
        if let Some(name) = COLUMNS.iter().find(|name| read[*name].len() != count) {
            return Err(PyValueError::new_err(format!(
                "column `{name}` has {} values for {count} rows",
                read[*name].len()
            )));
        }
        let mut rows = Vec::with_capacity(count);
        let mut errors = Vec::new();
        let at = |name: &str, index: usize| &read[name][index];
        for index in 0..count {
            let get = |name: &str| at(name, index);
            let file: String = get("file").extract()?;
            let session: u32 = get("session").extract()?;
            if let Some(error) = get("error").extract::<Option<String>>()? {
                errors.push((file, session, error));
                continue;
            }
            let hashes = |name: &str| -> PyResult<Vec<i64>> { get(name).extract() };
            rows.push(TraceRow {
                file,
                session,
                identity: get("identity").extract()?,
                turn: get("turn").extract()?,
                time: get("time").extract()?,
                input_length: get("input_length").extract()?,
                output_length: get("output_length").extract()?,
                shared_with_previous: get("shared_with_previous").extract()?,
                shared_with_previous_sequence: get("shared_with_previous_sequence").extract()?,
                previous_input_tokens: get("previous_input_tokens").extract()?,
                kept_blocks: get("kept_blocks").extract()?,
                hash_ids: hashes("hash_ids")?,
                generated_hash_ids: hashes("generated_hash_ids")?,
                finding: get("finding").extract()?,
                block_size: get("block_size").extract()?,
                renderer: get("renderer").extract()?,
            });
        }
        errors.sort();
        let trace = py
            .detach(|| trace_of_rows(rows))
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        Ok(Self {
            trace,
            rows: count,
            errors,
        })
    }

    /// Rows read, the failed ones included.
    #[getter]
    fn rows(&self) -> usize {
        self.rows
    }

    /// The files (and sessions) that could not be traced: `(file, session, error)`, sorted.
    #[getter]
    fn errors(&self) -> Vec<(String, u32, String)> {
        self.errors.clone()
    }

    /// The report `kvlint workload --format json` prints for the same sessions.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let trace = self.trace()?;
        let report = py.detach(|| workload_report(trace));
        let value = serde_json::to_value(&report)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        crate::to_python(py, &value)
    }

    /// The page `kvlint workload --format html` writes for the same files, the workload named
    /// `name` in it (the command names it after the paths it was given).
    #[pyo3(signature = (name = "workload"))]
    fn report_html(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let trace = self.trace()?;
        Ok(py.detach(|| {
            let report = workload_report(trace);
            workload_html("kvlint workload", &[(name, &report)], &[])
        }))
    }

    /// The hashed trace `kvlint workload --export-trace FORMAT --block-size N` writes for the
    /// same sessions (`mooncake`, `mooncake-agentic`, `bailian`, `weka`, `lmcache`; the
    /// format's block size by default, a multiple of the rows' own).
    #[pyo3(signature = (format, block_size = None))]
    fn export_trace(
        &self,
        py: Python<'_>,
        format: &str,
        block_size: Option<u32>,
    ) -> PyResult<String> {
        let trace = self.trace()?;
        let format = HashedFormat::from_name(format).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown trace format `{format}`: mooncake, mooncake-agentic, bailian, weka or lmcache"
            ))
        })?;
        let block_size = block_size.unwrap_or_else(|| format.default_block_size());
        let mut out = Vec::new();
        py.detach(|| export_hashed(trace, format, block_size, &mut out))
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        String::from_utf8(out).map_err(|error| PyValueError::new_err(error.to_string()))
    }

    fn __repr__(&self) -> String {
        let requests = self.trace.as_ref().map_or(0, |trace| trace.requests.len());
        let sessions = self.trace.as_ref().map_or(0, |trace| trace.sessions.len());
        format!(
            "Workload(rows={}, sessions={sessions}, requests={requests}, errors={})",
            self.rows,
            self.errors.len()
        )
    }
}
