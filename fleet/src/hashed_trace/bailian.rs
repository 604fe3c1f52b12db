//! The Qwen-Bailian traces' JSON Lines (`alibaba-edu/qwen-bailian-usagetraces-anon`,
//! `README.md`): see the module above for each field.

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use super::mooncake::write_line;
use super::{HashedRequest, HashedTraceError, ReadRequest, Record, numbered_lines, round_json};

/// Writes `requests` one line each, `chat_id` their position in the file.
pub(super) fn write(requests: &[HashedRequest], out: &mut impl Write) -> std::io::Result<()> {
    for (chat_id, request) in requests.iter().enumerate() {
        let parent = request.previous.map_or(-1, |previous| previous as i64);
        let mut fields: Vec<(&str, Value)> = vec![
            ("chat_id", chat_id.into()),
            ("parent_chat_id", parent.into()),
        ];
        if let Some(time) = request.time {
            fields.push(("timestamp", round_json(time, 1_000_000.0)));
        }
        fields.extend([
            ("input_length", request.input_length.into()),
            ("output_length", request.output_length.into()),
            ("type", "text".into()),
            ("turn", (request.turn + 1).into()),
            ("hash_ids", request.hash_ids.clone().into()),
        ]);
        write_line(&fields, out)?;
    }
    Ok(())
}

/// Reads Bailian lines: a session is a root request (`parent_chat_id` -1, or a parent the
/// file does not hold) and the requests whose parents lead to it, ordered by `turn` (as
/// AIPerf's `BailianTraceDatasetLoader._group_into_sessions` groups them).
pub(super) fn read(path: &str, text: &str) -> Result<Vec<ReadRequest>, HashedTraceError> {
    let mut parents: HashMap<String, Option<String>> = HashMap::new();
    let mut rows = Vec::new();
    for (line, content) in numbered_lines(text) {
        let record = Record::parse(path, line, content)?;
        let chat = record
            .identifier("chat_id")
            .ok_or_else(|| record.error("`chat_id` is missing".into()))?;
        let parent = record
            .identifier("parent_chat_id")
            .filter(|parent| parent != "-1" && *parent != chat);
        let turn = record.number("turn")?.unwrap_or(0.0);
        parents.insert(chat.clone(), parent);
        rows.push((
            turn,
            chat,
            ReadRequest {
                session: String::new(),
                time: record.number("timestamp")?,
                input_length: record.tokens("input_length")?,
                output_length: record.tokens("output_length")?,
                hash_ids: record.hash_ids("hash_ids")?,
                line,
                seed: 0,
            },
        ));
    }
    let walk = |chat: &str| -> String {
        let mut current = chat.to_owned();
        // At most one step per request: a cycle ends the walk.
        for _ in 0..parents.len() {
            match parents.get(&current) {
                Some(Some(parent)) if parents.contains_key(parent) => current = parent.clone(),
                _ => break,
            }
        }
        current
    };
    let mut roots: HashMap<String, String> = HashMap::new();
    // Per session: the position of its first line in the file.
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut keyed = Vec::with_capacity(rows.len());
    for (position, (turn, chat, mut request)) in rows.into_iter().enumerate() {
        let root = match parents.get(&chat).cloned().flatten() {
            Some(parent) => roots.get(&parent).cloned().unwrap_or_else(|| walk(&chat)),
            None => chat.clone(),
        };
        let rank = *first_line.entry(root.clone()).or_insert(position);
        request.session = format!("chat-{root}");
        roots.insert(chat, root);
        keyed.push((rank, turn, request));
    }
    // Sessions in the order of their first line, each session's requests by turn (ties in
    // the file's order: the sort is stable).
    keyed.sort_by(|left, right| left.0.cmp(&right.0).then(left.1.total_cmp(&right.1)));
    Ok(keyed.into_iter().map(|(_, _, request)| request).collect())
}
