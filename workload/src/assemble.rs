//! The one assembly of a workload into its trace, for `kvlint workload` and `kvlint simulate`:
//! session files (recordings too), request logs' sessions, benchmark datasets and hashed
//! traces, each traced its own way and joined in that order at one block size, the sessions'
//! trace kept in the trace cache ([`crate::store`]) so that a later run on the same files
//! skips the rendering. The map step of a distributed job (`kvlint_cache.workload`) reads the
//! same inputs into rows instead ([`WorkloadInputs::rows`]), which its reduce step joins into
//! the same trace.

use std::path::PathBuf;
use std::time::Instant;

use kvlint_core::session::SessionFile;
use kvlint_fleet::Trace;
use kvlint_fleet::cache::VLLM_BLOCK_SIZE;
use kvlint_fleet::hashed_trace::{HashedTraceError, rebinned};
use kvlint_render::render::Renderer;
use kvlint_request::error::InputError;

use crate::error::TraceFileError;
use crate::export::dataset_trace;
use crate::rows::{TraceRow, trace_rows};
use crate::store::{load, save, trace_key, trace_path};
use crate::trace::build_named_trace;

/// A file read as it was given.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// How it is shown and keyed in the trace cache (its path as given).
    pub name: String,
    /// Its name relative to the folder it was found in: what its sessions are known by when
    /// they carry no session key ([`session_identity`]).
    pub relative: String,
    pub bytes: Vec<u8>,
}

/// A session of a request log, and the name it is known by when it carries no session key.
pub struct LoggedSession {
    pub session: SessionFile,
    pub name: String,
}

/// Everything a workload is read from.
#[derive(Default)]
pub struct WorkloadInputs {
    /// Session files and recordings.
    pub files: Vec<InputFile>,
    /// Request logs' sessions; `Some` when logs were read, even if none was kept (a log's
    /// trace is built again each run: its summary comes from reading it).
    pub logged: Option<Vec<LoggedSession>>,
    /// Benchmark datasets, each prompt tokenized without a template.
    pub datasets: Vec<InputFile>,
    /// Hashed traces, read at their own block sizes.
    pub hashed: Vec<Trace>,
}

/// How the sessions become a trace.
pub struct TraceSetup<'a> {
    pub renderer: &'a Renderer,
    /// What keys the renderer in the trace cache beside its name (the serving engine).
    pub renderer_key: String,
    /// Tokens per block; by default the first hashed trace's when it is the only input, else
    /// vLLM's ([`VLLM_BLOCK_SIZE`]).
    pub block: Option<u32>,
    /// Where traces are kept; `None`: trace again and keep nothing.
    pub cache: Option<PathBuf>,
}

/// A workload traced.
pub struct Assembled {
    pub trace: Trace,
    /// How long tracing took; `None` when the trace was read from the cache or from hashed
    /// traces alone.
    pub tracing_seconds: Option<f64>,
    /// The trace could not be kept in the cache: the next run traces again, nothing else.
    pub not_kept: Option<TraceFileError>,
}

/// A workload that cannot be traced.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AssembleError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Input(#[from] InputError),
    #[error("{path}: not a benchmark dataset")]
    #[diagnostic(
        code(kvlint::workload::dataset),
        help(
            "JSONL with `prompt` (vLLM custom, GuideLLM), JSONL of chat requests, or ShareGPT JSON"
        )
    )]
    NotADataset { path: String },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Hashed(#[from] HashedTraceError),
    #[error("no session and no hashed trace to read")]
    #[diagnostic(code(kvlint::workload::empty))]
    Empty,
}

impl WorkloadInputs {
    /// The trace of every input, set up by `setup`; `parse` reads a file's sessions from its
    /// name and bytes (the command's input seam: recordings, compressed files).
    pub fn trace(
        self,
        setup: &TraceSetup<'_>,
        parse: impl Fn(String, Vec<u8>) -> Result<Vec<SessionFile>, InputError>,
    ) -> Result<Assembled, AssembleError> {
        let Self {
            files,
            logged,
            datasets,
            hashed,
        } = self;
        if files.is_empty() && datasets.is_empty() && logged.is_none() {
            let block = setup
                .block
                .or(hashed.first().map(|trace| trace.block_size))
                .unwrap_or(VLLM_BLOCK_SIZE);
            return Ok(Assembled {
                trace: joined(Vec::new(), hashed, block)?,
                tracing_seconds: None,
                not_kept: None,
            });
        }
        let block = setup.block.unwrap_or(VLLM_BLOCK_SIZE);
        let keyed: Vec<(String, &[u8])> = files
            .iter()
            .chain(&datasets)
            .map(|file| (file.name.clone(), file.bytes.as_slice()))
            .collect();
        let key = trace_key(&keyed, &setup.renderer_key, block);
        let cached = setup
            .cache
            .as_ref()
            .filter(|_| logged.is_none())
            .map(|folder| trace_path(folder, &key));
        if let Some(path) = cached.as_ref().filter(|path| path.is_file())
            && let Ok(trace) = load(path)
        {
            return Ok(Assembled {
                trace: joined(vec![trace], hashed, block)?,
                tracing_seconds: None,
                not_kept: None,
            });
        }
        let started = Instant::now();
        let mut sessions = Vec::new();
        // Each session's name when it carries no session key.
        let mut names = Vec::new();
        for file in files {
            let found = parse(file.name, file.bytes)?;
            names.extend(std::iter::repeat_n(file.relative, found.len()));
            sessions.extend(found);
        }
        for logged in logged.unwrap_or_default() {
            sessions.push(logged.session);
            names.push(logged.name);
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut trace = build_named_trace(&sessions, &names, setup.renderer, block)?;
        for file in &datasets {
            let text = String::from_utf8_lossy(&file.bytes);
            let dataset = dataset_trace(&file.relative, &text, setup.renderer.tokenizer(), block)
                .ok_or_else(|| AssembleError::NotADataset {
                path: file.name.clone(),
            })?;
            trace.append(dataset);
        }
        let tracing_seconds = Some(started.elapsed().as_secs_f64());
        let not_kept = cached.and_then(|path| save(&trace, &path).err());
        Ok(Assembled {
            trace: joined(vec![trace], hashed, block)?,
            tracing_seconds,
            not_kept,
        })
    }
}

/// A row of the map step, and why its file or session was not traced (then the row names only
/// the file and the session's number).
pub type MappedRow = (TraceRow, Option<String>);

impl WorkloadInputs {
    /// The map step: the rows of the session files and logged sessions (datasets and hashed
    /// traces are not mapped), each session traced with `renderer` at `block` tokens per
    /// block, one row per request, as [`Self::trace`] traces them. A file or a session that
    /// cannot be traced is one row with its error: a bad file never stops the job. A logged
    /// session's number counts the sessions of its log before it.
    pub fn rows(
        self,
        renderer: &Renderer,
        block: u32,
        parse: impl Fn(String, Vec<u8>) -> Result<Vec<SessionFile>, InputError>,
    ) -> Vec<MappedRow> {
        let mut rows = Vec::new();
        let mut sessions: Vec<(String, SessionFile)> = Vec::new();
        for file in self.files {
            match parse(file.name, file.bytes) {
                Ok(found) => sessions.extend(found.into_iter().map(|s| (file.relative.clone(), s))),
                Err(error) => rows.push(failed_row(&file.relative, 0, error.to_string())),
            }
        }
        sessions.extend(
            self.logged
                .unwrap_or_default()
                .into_iter()
                .map(|logged| (logged.name, logged.session)),
        );
        let mut previous: Option<(String, u32)> = None;
        for (name, session) in sessions {
            let number = match previous.take() {
                Some((last, number)) if last == name => number + 1,
                _ => 0,
            };
            let one = [(name.clone(), number, session)];
            match trace_rows(&one, renderer, block) {
                Ok(traced) => rows.extend(traced.into_iter().map(|row| (row, None))),
                Err(error) => rows.push(failed_row(&name, number, error.to_string())),
            }
            previous = Some((name, number));
        }
        rows
    }
}

/// The row of a file, or of one of its sessions, that was not traced.
pub fn failed_row(file: &str, session: u32, error: String) -> MappedRow {
    let row = TraceRow {
        file: file.to_owned(),
        session,
        ..TraceRow::default()
    };
    (row, Some(error))
}

/// `traces` and then `hashed`, all at `block` tokens per block (a hashed trace's blocks
/// joined into multiples of its own).
pub fn joined(traces: Vec<Trace>, hashed: Vec<Trace>, block: u32) -> Result<Trace, AssembleError> {
    let at_block = |trace: Trace| {
        if trace.block_size == block {
            Ok(trace)
        } else {
            rebinned(&trace, block)
        }
    };
    let mut all = traces.into_iter().chain(hashed);
    let mut joined = match all.next() {
        Some(first) => at_block(first)?,
        None => return Err(AssembleError::Empty),
    };
    for trace in all {
        joined.append(at_block(trace)?);
    }
    Ok(joined)
}
