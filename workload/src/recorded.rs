//! The requests a recording of `kvlint proxy --record` on a real fleet names, with the replica
//! that served each and the prompt tokens its engine served from cache: what
//! `kvlint simulate --calibrate` holds the fleet's model to ([`kvlint_fleet::calibrate`]).

use kvlint_core::cache::reported_usage;
use kvlint_core::session::SessionFile;
use kvlint_fleet::RecordedRequest;
use kvlint_request::error::InputError;
use serde_json::Value;

/// A recording whose requests cannot be calibrated against.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RecordingError {
    #[error("{file}:{line}: the request has no `replica` field")]
    #[diagnostic(
        code(kvlint::simulate::calibrate::no_replica),
        help(
            "record with `kvlint proxy --record DIR` where it learns the replica: behind a \
             gateway that names it in a response header (`--replica-header`, nginx: \
             `add_header X-Kvlint-Replica $upstream_addr always;`), with `--replica-metrics URL` \
             for each replica (sequential traffic), or one proxy in front of each replica"
        )
    )]
    NoReplica { file: String, line: usize },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Input(#[from] InputError),
}

/// The requests of `session`, a recording of `kvlint proxy --record`, in turn order.
pub fn recorded_requests(session: &SessionFile) -> Result<Vec<RecordedRequest>, RecordingError> {
    (0..session.len())
        .map(|index| {
            let line = session.turn_line(index);
            let replica = session
                .turn_document(index)
                .and_then(|range| session.text.get(range))
                .and_then(|document| serde_json::from_str::<Value>(document).ok())
                .and_then(|document| document.get("replica")?.as_str().map(str::to_owned))
                .ok_or_else(|| RecordingError::NoReplica {
                    file: session.path.clone(),
                    line,
                })?;
            let turn = session.turn(index)?;
            let served_tokens = turn
                .response
                .as_ref()
                .and_then(reported_usage)
                .map(|usage| u32::try_from(usage.cached_tokens).unwrap_or(u32::MAX));
            Ok(RecordedRequest {
                file: session.path.clone(),
                line,
                replica,
                served_tokens,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_recording_gives_each_request_s_replica_and_served_tokens() {
        let text = concat!(
            r#"{"request": {"messages": [{"role": "user", "content": "Hi"}]}, "#,
            r#""response": {"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4}}}, "#,
            r#""time": "2026-12-01T00:00:00.000Z", "replica": "127.0.0.1:8081"}"#,
            "\n",
            r#"{"request": {"messages": [{"role": "user", "content": "Hi"}]}, "#,
            r#""response": {"timings": {"cache_n": 7, "prompt_n": 3}}, "replica": "127.0.0.1:8082"}"#,
            "\n",
        );
        let session = SessionFile::parse("session-0001.jsonl".into(), Arc::from(text)).unwrap();
        let requests = recorded_requests(&session).unwrap();
        assert_eq!(
            requests,
            vec![
                RecordedRequest {
                    file: "session-0001.jsonl".into(),
                    line: 1,
                    replica: "127.0.0.1:8081".into(),
                    served_tokens: Some(4),
                },
                RecordedRequest {
                    file: "session-0001.jsonl".into(),
                    line: 2,
                    replica: "127.0.0.1:8082".into(),
                    served_tokens: Some(7),
                },
            ]
        );
    }

    #[test]
    fn a_request_without_its_replica_is_named_by_file_and_line() {
        let text = concat!(
            r#"{"request": {"messages": [{"role": "user", "content": "Hi"}]}, "replica": "a"}"#,
            "\n",
            r#"{"request": {"messages": [{"role": "user", "content": "Hi"}]}}"#,
            "\n",
        );
        let session = SessionFile::parse("recorded/s.jsonl".into(), Arc::from(text)).unwrap();
        let error = recorded_requests(&session).unwrap_err();
        assert_eq!(
            error.to_string(),
            "recorded/s.jsonl:2: the request has no `replica` field"
        );
    }
}
