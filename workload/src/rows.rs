//! A trace as rows, one per request, for workloads too large for one machine: the map step
//! ([`trace_rows`]) traces a batch of sessions into self-contained rows (each request with
//! its session, time, lengths and the full list of its prompt's block hashes), which a
//! distributed engine (Ray, Spark) writes, shuffles and aggregates as it likes; the reduce
//! step ([`trace_of_rows`]) joins any set of rows back into the [`Trace`] `kvlint workload`
//! builds from the same sessions, for its report and its hashed-trace export.
//!
//! A session's rows must all reach the same reduce, but no session needs another's to be
//! traced: the hashes are content hashes chained from the session's first block, so that
//! equal hashes on two workers name equal prefixes. The rows of one file come from one map
//! call, so a session is never split across workers.
//!
//! Hashes are written as signed 64-bit integers (the same bits as [`Trace::blocks`]), the
//! integer type every engine's SQL has (Spark has no unsigned one).

use std::collections::BTreeMap;
use std::path::Path;

use kvlint_core::session::SessionFile;
use kvlint_render::render::Renderer;
use kvlint_request::error::InputError;
use serde::{Deserialize, Serialize};

use kvlint_fleet::{Blocks, NewRequest, Trace, TraceBuilder, range};

use crate::trace::trace_session;

/// One request of a workload, as the map step writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceRow {
    /// The name of the file its session came from, relative to the folder the workload was
    /// given (as `kvlint workload` names it: a session's identity falls back to it, and the
    /// reduce orders sessions by it).
    pub file: String,
    /// Its session's number in that file (a recording holds several).
    pub session: u32,
    /// Who its session is ([`crate::session_identity`]).
    pub identity: String,
    /// Its turn in the session, from 0.
    pub turn: u32,
    /// When it was sent, in seconds since the Unix epoch, when the recording says.
    pub time: Option<f64>,
    pub input_length: u32,
    pub output_length: u32,
    /// See [`kvlint_fleet::TraceRequest::shared_with_previous`].
    pub shared_with_previous: u32,
    /// See [`kvlint_fleet::TraceRequest::shared_with_previous_sequence`].
    pub shared_with_previous_sequence: u32,
    /// See [`kvlint_fleet::TraceRequest::previous_input_tokens`].
    pub previous_input_tokens: u32,
    /// See [`kvlint_fleet::TraceRequest::kept_blocks`].
    pub kept_blocks: u32,
    /// The prompt's full blocks, as chained hashes (signed, the same bits).
    pub hash_ids: Vec<i64>,
    /// The blocks the generated tokens complete after the prompt's.
    pub generated_hash_ids: Vec<i64>,
    /// The rule kvlint's check names for this turn's break.
    pub finding: Option<String>,
    /// Tokens per block.
    pub block_size: u32,
    /// The renderer the prompts were tokenized with.
    pub renderer: String,
}

/// Why rows do not make a trace.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RowsError {
    #[error("the rows mix {first} and {other}: trace every session with one {what}")]
    #[diagnostic(code(kvlint::workload::rows))]
    Mixed {
        what: &'static str,
        first: String,
        other: String,
    },
    #[error(
        "session {session} of `{file}`: turn {turn} is missing (a session's rows must all reach the same reduce)"
    )]
    #[diagnostic(code(kvlint::workload::rows))]
    MissingTurn {
        file: String,
        session: u32,
        turn: u32,
    },
    #[error(
        "session {session} of `{file}`: turn {turn}'s {kept} kept blocks are more than its previous turn's {previous}"
    )]
    #[diagnostic(code(kvlint::workload::rows))]
    KeptBeyondPrevious {
        file: String,
        session: u32,
        turn: u32,
        kept: u32,
        previous: usize,
    },
}

/// The map step: traces `sessions`, each with the name of the file it came from (relative to
/// the workload's folder), with `renderer` at `block_size` tokens per block, one session after
/// the other on the calling thread (the distributed engine runs one such call per core).
pub fn trace_rows(
    sessions: &[(String, u32, SessionFile)],
    renderer: &Renderer,
    block_size: u32,
) -> Result<Vec<TraceRow>, InputError> {
    let block_size = block_size.max(1);
    let mut rows = Vec::new();
    for (file, number, session) in sessions {
        let identity = crate::session_identity(session, file);
        let traced = trace_session(session, identity.clone(), renderer, block_size)?;
        let mut prompt: Vec<u64> = Vec::new();
        for (turn, request) in traced.requests.iter().enumerate() {
            prompt.truncate(request.kept_blocks as usize);
            prompt.extend_from_slice(&traced.blocks[range(&request.new_blocks)]);
            rows.push(TraceRow {
                file: file.clone(),
                session: *number,
                identity: identity.clone(),
                turn: turn as u32,
                time: request.time,
                input_length: request.input_tokens,
                output_length: request.output_tokens,
                shared_with_previous: request.shared_with_previous,
                shared_with_previous_sequence: request.shared_with_previous_sequence,
                previous_input_tokens: request.previous_input_tokens,
                kept_blocks: request.kept_blocks,
                hash_ids: prompt.iter().map(|hash| *hash as i64).collect(),
                generated_hash_ids: traced.blocks[range(&request.generated_blocks)]
                    .iter()
                    .map(|hash| *hash as i64)
                    .collect(),
                finding: request
                    .finding
                    .map(|rule| traced.rules[usize::from(rule)].clone()),
                block_size,
                renderer: renderer.name(),
            });
        }
    }
    Ok(rows)
}

/// The reduce step: the trace `kvlint workload` builds from the sessions the rows came from,
/// whatever order the rows arrive in. Sessions are ordered as `kvlint workload` orders them:
/// by file (as paths sort, folder by folder), then by their number in the file.
pub fn trace_of_rows(rows: impl IntoIterator<Item = TraceRow>) -> Result<Option<Trace>, RowsError> {
    let mut sessions: BTreeMap<(Vec<String>, u32), Vec<TraceRow>> = BTreeMap::new();
    let mut settings: Option<(u32, String)> = None;
    for row in rows {
        match &settings {
            None => settings = Some((row.block_size, row.renderer.clone())),
            Some((block_size, _)) if *block_size != row.block_size => {
                return Err(RowsError::Mixed {
                    what: "block size",
                    first: block_size.to_string(),
                    other: row.block_size.to_string(),
                });
            }
            Some((_, renderer)) if *renderer != row.renderer => {
                return Err(RowsError::Mixed {
                    what: "renderer",
                    first: renderer.clone(),
                    other: row.renderer.clone(),
                });
            }
            Some(_) => {}
        }
        let components = Path::new(&row.file)
            .components()
            .map(|component| component.as_os_str().to_string_lossy().into_owned())
            .collect();
        sessions
            .entry((components, row.session))
            .or_default()
            .push(row);
    }
    let Some((block_size, renderer)) = settings else {
        return Ok(None);
    };
    let mut builder = TraceBuilder::new(block_size, renderer);
    for (_, mut rows) in sessions {
        rows.sort_by_key(|row| row.turn);
        let identity = rows.first().map(|row| row.identity.clone());
        let session = builder.open(identity.unwrap_or_default(), 0);
        let mut previous_blocks = 0;
        for (expected, row) in rows.iter().enumerate() {
            if row.turn != expected as u32 {
                return Err(RowsError::MissingTurn {
                    file: row.file.clone(),
                    session: row.session,
                    turn: expected as u32,
                });
            }
            if row.kept_blocks as usize > previous_blocks {
                return Err(RowsError::KeptBeyondPrevious {
                    file: row.file.clone(),
                    session: row.session,
                    turn: row.turn,
                    kept: row.kept_blocks,
                    previous: previous_blocks,
                });
            }
            previous_blocks = row.hash_ids.len();
            let as_hashes = |ids: &[i64]| ids.iter().map(|id| *id as u64).collect::<Vec<u64>>();
            let prompt = as_hashes(&row.hash_ids[row.kept_blocks as usize..]);
            let generated = as_hashes(&row.generated_hash_ids);
            builder.push(
                session,
                &NewRequest {
                    time: row.time,
                    input_tokens: row.input_length,
                    output_tokens: row.output_length,
                    shared_with_previous: row.shared_with_previous,
                    shared_with_previous_sequence: row.shared_with_previous_sequence,
                    kept_blocks: row.kept_blocks as usize,
                    blocks: Blocks::Chained {
                        prompt: &prompt,
                        generated: &generated,
                    },
                    finding: row.finding.as_deref(),
                },
            );
        }
        builder.close(session);
    }
    Ok(Some(builder.finish()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn session(path: &str, system: &str, turns: usize) -> SessionFile {
        let bodies: Vec<String> = (1..=turns)
            .map(|turn| {
                let mut messages = vec![format!(r#"{{"role":"system","content":"{system}"}}"#)];
                for earlier in 0..turn {
                    messages.push(format!(
                        r#"{{"role":"user","content":"question {earlier} about the repository and its tests"}}"#
                    ));
                    if earlier + 1 < turn {
                        messages.push(format!(
                            r#"{{"role":"assistant","content":"answer {earlier}, with some detail"}}"#
                        ));
                    }
                }
                format!(r#"{{"model":"m","messages":[{}]}}"#, messages.join(","))
            })
            .collect();
        SessionFile::parse(path.into(), Arc::from(bodies.join("\n"))).unwrap()
    }

    #[test]
    fn rows_in_any_order_give_back_the_trace_built_on_one_machine() {
        let system = "You are a careful coding agent. Read before you edit and run the tests.";
        let files = [
            ("a.jsonl", session("a.jsonl", system, 4)),
            ("b.jsonl", session("b.jsonl", system, 3)),
            (
                "sub/c.jsonl",
                session("sub/c.jsonl", "Another agent entirely.", 5),
            ),
        ];
        let renderer = Renderer::provider();
        let sessions: Vec<SessionFile> = files.iter().map(|(_, session)| session.clone()).collect();
        let mut expected = crate::build_trace(&sessions, &renderer, 4).unwrap();
        for (traced, (file, session)) in expected.sessions.iter_mut().zip(&files) {
            traced.identity = crate::session_identity(session, file);
        }
        let named: Vec<(String, u32, SessionFile)> = files
            .iter()
            .map(|(file, session)| ((*file).to_owned(), 0, session.clone()))
            .collect();
        // Two map calls, their rows shuffled as a distributed engine delivers them.
        let mut rows = trace_rows(&named[2..], &renderer, 4).unwrap();
        rows.extend(trace_rows(&named[..2], &renderer, 4).unwrap());
        rows.reverse();
        let trace = trace_of_rows(rows).unwrap().unwrap();
        assert_eq!(trace, expected);
        assert!(trace.blocks.len() > 10);
    }

    #[test]
    fn a_session_split_or_mixed_is_refused_by_name() {
        let renderer = Renderer::provider();
        let named = vec![("a.jsonl".to_owned(), 0, session("a.jsonl", "Be brief.", 3))];
        let rows = trace_rows(&named, &renderer, 4).unwrap();
        let without_turn_1: Vec<TraceRow> =
            rows.iter().filter(|row| row.turn != 1).cloned().collect();
        let error = trace_of_rows(without_turn_1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "session 0 of `a.jsonl`: turn 1 is missing (a session's rows must all reach the same reduce)"
        );
        let mut mixed = rows.clone();
        mixed[0].block_size = 16;
        assert!(matches!(
            trace_of_rows(mixed),
            Err(RowsError::Mixed {
                what: "block size",
                ..
            })
        ));
        assert_eq!(trace_of_rows(Vec::new()).unwrap(), None);
    }
}
