//! LMCache's lookup-hash log (`LMCache/LMCache`, `lmcache/tools/cache_simulator/README.md`,
//! "Step 1: Enable Lookup Hash Logging"; read by `simulator.py`, `load_lookup_events`): one
//! JSON line per request; see the module above for each field.

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use super::mooncake::write_line;
use super::{HashedRequest, HashedTraceError, ReadRequest, Record, numbered_lines, round_json};

/// Writes `requests` one line each; `chunk_hashes` holds the full blocks' ids alone, as hex
/// strings, as LMCache logs them (a partial chunk is never looked up).
pub(super) fn write(
    requests: &[HashedRequest],
    model: &str,
    block_size: u32,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for (number, request) in requests.iter().enumerate() {
        let full = (request.input_length / block_size) as usize;
        let hashes: Vec<Value> = request.hash_ids[..full.min(request.hash_ids.len())]
            .iter()
            .map(|id| format!("0x{id:x}").into())
            .collect();
        let mut fields: Vec<(&str, Value)> = Vec::with_capacity(8);
        if let Some(time) = request.time {
            fields.push(("timestamp", round_json(time, 1_000_000.0)));
        }
        fields.extend([
            ("request_id", format!("request-{number}").into()),
            ("model_name", model.into()),
            ("chunk_size", block_size.into()),
            ("seq_len", request.input_length.into()),
            ("dtypes", Value::Array(Vec::new())),
            ("shapes", Value::Array(Vec::new())),
            ("chunk_hashes", Value::Array(hashes)),
        ]);
        write_line(&fields, out)?;
    }
    Ok(())
}

/// Reads lookup lines, each a session of its own (the log has no session); the hashes, opaque
/// strings, become ids in first-seen order. Returns the chunk size the lines state.
pub(super) fn read(
    path: &str,
    text: &str,
) -> Result<(Vec<ReadRequest>, Option<u32>), HashedTraceError> {
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut chunk_size = None;
    let mut requests = Vec::new();
    for (line, content) in numbered_lines(text) {
        let record = Record::parse(path, line, content)?;
        let size = record.tokens("chunk_size")?;
        if *chunk_size.get_or_insert(size) != size {
            return Err(record.error(format!(
                "chunks of {size} tokens where the file's first line has {}",
                chunk_size.unwrap_or(size)
            )));
        }
        let hashes = match record.fields.get("chunk_hashes") {
            Some(Value::Array(hashes)) => hashes,
            _ => return Err(record.error("`chunk_hashes` is missing or not a list".into())),
        };
        let hash_ids = hashes
            .iter()
            .map(|hash| match hash {
                Value::String(hash) => {
                    let next = ids.len() as u64;
                    Ok(*ids.entry(hash.clone()).or_insert(next))
                }
                other => Err(record.error(format!("`chunk_hashes` holds {other}, not a string"))),
            })
            .collect::<Result<Vec<u64>, _>>()?;
        requests.push(ReadRequest {
            session: record
                .identifier("request_id")
                .map_or_else(|| format!("{path}:{line}"), |id| format!("{path}:{id}")),
            time: record.number("timestamp")?,
            input_length: record.tokens("seq_len")?,
            output_length: 0,
            hash_ids,
            line,
            seed: 0,
        });
    }
    Ok((requests, chunk_size))
}
