//! The Claude Code (Weka kv-cache-tester) traces AIPerf reads (`ai-dynamo/aiperf`,
//! `src/aiperf/dataset/loader/weka_trace_models.py`, `WekaTrace`): one object per
//! conversation; see the module above for each field.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{HashedRequest, HashedTraceError, ReadRequest, Record, numbered_lines, round_json};

/// One conversation object per session, in order of the sessions' first requests, ids
/// numbered within each conversation (`hash_id_scope: "local"`).
pub(super) fn conversations(
    requests: &[HashedRequest],
    model: &str,
    block_size: u32,
) -> Vec<Value> {
    let mut sessions: Vec<(Vec<Value>, HashMap<u64, u64>)> = Vec::new();
    for request in requests {
        let session = request.session as usize;
        if sessions.len() <= session {
            sessions.resize_with(session + 1, Default::default);
        }
        let (entries, ids) = &mut sessions[session];
        let hash_ids: Vec<u64> = request
            .hash_ids
            .iter()
            .map(|id| {
                let next = ids.len() as u64;
                *ids.entry(*id).or_insert(next)
            })
            .collect();
        let mut entry = json!({"t": Value::Null, "type": "n", "model": model,
            "in": request.input_length, "out": request.output_length, "hash_ids": hash_ids});
        match request.time {
            Some(time) => entry["t"] = round_json(time, 1_000_000.0),
            // `t` is required: a request the recording has no time for is sent at its
            // session's previous request's.
            None => {
                let previous = entries
                    .last()
                    .and_then(|last: &Value| last.get("t").cloned());
                entry["t"] = previous.unwrap_or_else(|| json!(0));
            }
        }
        entries.push(entry);
    }
    sessions
        .into_iter()
        .enumerate()
        .map(|(number, (entries, _))| {
            json!({"id": format!("session-{number}"), "models": [model],
                "block_size": block_size, "hash_id_scope": "local", "requests": entries})
        })
        .collect()
}

/// Reads a conversation object, or JSON Lines of them; returns the requests (a sub-agent's
/// its own session, in its conversation's id scope) and the block size the file states.
pub(super) fn read(path: &str, text: &str) -> Result<(Vec<ReadRequest>, u32), HashedTraceError> {
    let documents: Vec<(usize, Value)> = match serde_json::from_str::<Value>(text) {
        Ok(whole) => vec![(1, whole)],
        Err(_) => numbered_lines(text)
            .map(|(line, content)| Ok((line, Record::parse(path, line, content)?.into_value())))
            .collect::<Result<_, HashedTraceError>>()?,
    };
    let mut requests = Vec::new();
    let mut block_size = None;
    for (line, document) in documents {
        let record = Record::of(path, line, document)?;
        let id = record
            .identifier("id")
            .ok_or_else(|| record.error("`id` is missing".into()))?;
        let size = record.tokens("block_size")?;
        if *block_size.get_or_insert(size) != size {
            return Err(record.error(format!(
                "blocks of {size} tokens where the file's first conversation has {}",
                block_size.unwrap_or(size)
            )));
        }
        // Ids are the conversation's own: its chains start from a seed of its own.
        let seed = blake3_seed(path, &id);
        let entries = match record.fields.get("requests") {
            Some(Value::Array(entries)) => entries,
            _ => return Err(record.error("`requests` is missing or not a list".into())),
        };
        for (position, entry) in entries.iter().enumerate() {
            let place = format!("requests[{position}]");
            let entry =
                Record::of(path, line, entry.clone()).map_err(|error| prefixed(error, &place))?;
            if entry.fields.get("type").and_then(Value::as_str) == Some("subagent") {
                let agent = entry
                    .identifier("agent_id")
                    .unwrap_or_else(|| place.clone());
                let inner = match entry.fields.get("requests") {
                    Some(Value::Array(inner)) => inner,
                    _ => return Err(entry.error(format!("{place}: `requests` is not a list"))),
                };
                for (inner_position, inner) in inner.iter().enumerate() {
                    let place = format!("{place}.requests[{inner_position}]");
                    let inner = Record::of(path, line, inner.clone())
                        .map_err(|error| prefixed(error, &place))?;
                    requests.push(
                        request(&inner, format!("{id}/{agent}"), seed)
                            .map_err(|error| prefixed(error, &place))?,
                    );
                }
            } else {
                requests.push(
                    request(&entry, id.clone(), seed).map_err(|error| prefixed(error, &place))?,
                );
            }
        }
    }
    Ok((requests, block_size.unwrap_or(64)))
}

fn request(entry: &Record, session: String, seed: u64) -> Result<ReadRequest, HashedTraceError> {
    Ok(ReadRequest {
        session,
        time: entry.number("t")?,
        input_length: entry.tokens("in")?,
        output_length: entry.tokens("out")?,
        hash_ids: entry.hash_ids("hash_ids")?,
        line: entry.line,
        seed,
    })
}

fn blake3_seed(path: &str, id: &str) -> u64 {
    let hash = blake3::hash(format!("{path}\n{id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

fn prefixed(error: HashedTraceError, place: &str) -> HashedTraceError {
    match error {
        HashedTraceError::Line { path, line, reason } => HashedTraceError::Line {
            path,
            line,
            reason: format!("{place}: {reason}"),
        },
        other => other,
    }
}
