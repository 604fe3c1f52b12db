//! `kvlint import RECORDING… --out DIR`: the sessions a recording holds (a VCR cassette, a
//! HAR file), written as plain session files, one request body per line, to commit as
//! fixtures, edit and check again.

use std::path::{Path, PathBuf};

use kvlint_recordings::{Recording, Session};
use kvlint_request::error::InputError;

use super::Outcome;
use crate::emit::{self, Output, OutputFormat, OutputKind, Terminal};
use crate::report::import::{
    ImportReport, ImportedRecording, ImportedSession, Placement, SkippedInteraction,
};
use crate::report::{ErrorReport, REPORT_VERSION};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Recordings: VCR cassettes (vcrpy, pytest-recording, LangGraph's msgpack, go-vcr, Ruby or
    /// R vcr; gzip-compressed or not), HAR files and Inspect AI eval logs (JSON).
    #[arg(required = true)]
    pub recordings: Vec<PathBuf>,
    /// The folder the session files are written to (made if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace session files already in the folder.
    #[arg(long)]
    pub force: bool,
    /// Say, for each interaction, which session and turn it went to and why (a new
    /// conversation, another agent handed a session's history, a retry, a rewrite, …).
    #[arg(long)]
    pub explain: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: OutputFormat,
}

/// A file that is not a recording kvlint reads, or one it cannot read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
enum ImportError {
    #[error("{path}: not a recording kvlint reads")]
    #[diagnostic(
        code(kvlint::not_a_recording),
        help(
            "expected a VCR cassette (YAML with `interactions` or `http_interactions`), a HAR \
             file (`log.entries`) or an Inspect AI eval log; a session file is checked as it is"
        )
    )]
    NotARecording { path: String },
    /// The recording or a session file cannot be read or written.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Input(#[from] InputError),
    #[error("{path} exists")]
    #[diagnostic(
        code(kvlint::exists),
        help("pass --force to replace it, or choose another --out folder")
    )]
    Exists { path: String },
}

pub fn run(args: Args, terminal: Terminal) -> miette::Result<Outcome> {
    emit::supported(OutputKind::Import, args.format)?;
    let mut report = ImportReport {
        version: REPORT_VERSION,
        recordings: Vec::new(),
        errors: Vec::new(),
    };
    // Names given to this run's session files: two recordings named alike get apart.
    let mut stems = std::collections::HashSet::new();
    for path in &args.recordings {
        let display = path.display().to_string();
        let stem = path
            .file_name()
            .and_then(|name| name.to_str())
            .map_or("recording", |name| name.split('.').next().unwrap_or(name));
        let stem = (1..)
            .map(|count| match count {
                1 => stem.to_owned(),
                count => format!("{stem}-{count}"),
            })
            .find(|stem| stems.insert(stem.clone()))
            .unwrap_or_default();
        match import(path, &stem, &args.out, args.force, args.explain) {
            Ok(imported) => report.recordings.push(imported),
            Err(error) => report.errors.push(ErrorReport::new(display, error)),
        }
    }
    Outcome::emitted(
        args.format,
        &Output::Import(&report),
        terminal,
        !report.errors.is_empty(),
        false,
    )
}

fn import(
    path: &Path,
    stem: &str,
    out: &Path,
    force: bool,
    explain: bool,
) -> Result<ImportedRecording, ImportError> {
    let display = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| io_error(path, source))?;
    let recording = Recording::read(&bytes)
        .map_err(|error| InputError::BadRecording {
            path: display.clone(),
            line: error.at.line,
            column: error.at.column,
            message: error.message,
        })?
        .ok_or_else(|| ImportError::NotARecording {
            path: display.clone(),
        })?;
    let found = recording.sessions();
    std::fs::create_dir_all(out).map_err(|source| io_error(out, source))?;
    let mut sessions = Vec::new();
    for (number, session) in found.sessions.iter().enumerate() {
        let file = out.join(format!("{stem}.{}.jsonl", number + 1));
        write_session(&file, session, force)?;
        sessions.push(ImportedSession {
            file: file.display().to_string(),
            turns: session.bodies.len(),
            interactions: session.interactions.clone(),
            lines: session.at.iter().map(|place| place.line).collect(),
            rewritten: session.sent.iter().filter(|sent| sent.is_none()).count(),
            reconstructed: session.reconstructed,
            grouped_by: session.grouped_by.clone(),
            parent: session.parent.map(|parent| parent + 1),
        });
    }
    let placements = if explain {
        placements(&sessions, &found.skipped)
    } else {
        Vec::new()
    };
    Ok(ImportedRecording {
        path: display,
        container: recording.container.as_str(),
        interactions: recording.interactions.len(),
        sessions,
        placements,
        skipped: found
            .skipped
            .into_iter()
            .map(|(interaction, reason)| SkippedInteraction {
                interaction,
                reason,
            })
            .collect(),
    })
}

/// Every interaction, in order: the session (numbered from 1) and turn it went to and why, or
/// why it was passed over.
fn placements(sessions: &[ImportedSession], skipped: &[(usize, String)]) -> Vec<Placement> {
    let mut placed: Vec<Placement> = sessions
        .iter()
        .enumerate()
        .flat_map(|(number, session)| {
            session
                .interactions
                .iter()
                .enumerate()
                .map(move |(turn, interaction)| Placement {
                    interaction: *interaction,
                    session: Some(number + 1),
                    turn: Some(turn),
                    kind: Some(session.grouped_by.kind(turn)),
                    why: session.grouped_by.explain(turn, session.parent),
                })
        })
        .chain(skipped.iter().map(|(interaction, reason)| Placement {
            interaction: *interaction,
            session: None,
            turn: None,
            kind: None,
            why: reason.clone(),
        }))
        .collect();
    placed.sort_by_key(|placement| placement.interaction);
    placed
}

/// A session file ([`Session::jsonl`]), written to a temporary file first, then moved into
/// place.
fn write_session(file: &Path, session: &Session, force: bool) -> Result<(), ImportError> {
    if file.exists() && !force {
        return Err(ImportError::Exists {
            path: file.display().to_string(),
        });
    }
    let partial = file.with_extension("jsonl.partial");
    std::fs::write(&partial, session.jsonl()).map_err(|source| io_error(&partial, source))?;
    std::fs::rename(&partial, file).map_err(|source| io_error(file, source))?;
    Ok(())
}

fn io_error(path: &Path, source: std::io::Error) -> ImportError {
    ImportError::Input(InputError::Io {
        path: path.display().to_string(),
        source,
    })
}
