//! The session files written with `--record`: one `{request, response}` line per exchange,
//! what `kvlint check` reads, in numbered parts past a size.

use std::fs::File;
use std::io::{BufWriter, Write};

use serde_json::{Value, json};

use super::Analysis;
use crate::proxy::Exchange;

impl Analysis {
    /// Appends the exchange to its session's file as `{request, response}`, what `kvlint
    /// check` reads; the request's headers (keys included) are never written.
    pub(super) fn record(
        &mut self,
        index: usize,
        body: &Value,
        (response, response_text): (Option<Value>, &str),
        exchange: &Exchange,
        replica: Option<String>,
    ) {
        let Some(folder) = self.record.as_ref() else {
            return;
        };
        let response = response.unwrap_or_else(|| Value::String(response_text.to_owned()));
        let time = chrono::DateTime::<chrono::Utc>::from(exchange.received_at)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut line = json!({"request": body, "response": response, "time": time});
        if let Some(key) = &self.redact {
            line = crate::proxy::redact::redacted(&line, key);
        }
        if !exchange.complete {
            line["complete"] = Value::Bool(false);
        }
        if !(200..300).contains(&exchange.status) {
            line["status"] = json!(exchange.status);
        }
        if let Some(replica) = replica {
            line["replica"] = json!(replica);
        }
        let line = format!("{line}\n");
        let session = &mut self.sessions[index];
        let full = session.record_bytes > 0
            && session.record_bytes + line.len() as u64 > self.record_part_bytes;
        if session.record.is_none() || full {
            session.record_part += 1;
            session.record_bytes = 0;
            let name = match session.record_part {
                1 => format!("session-{:04}.jsonl", index + 1),
                part => format!("session-{:04}.{part}.jsonl", index + 1),
            };
            let path = folder.join(name);
            session.record = match File::create(&path) {
                Ok(file) => Some(BufWriter::new(file)),
                Err(error) => {
                    eprintln!(
                        "kvlint proxy: cannot record into {}: {error}",
                        path.display()
                    );
                    None
                }
            };
        }
        if let Some(record) = session.record.as_mut() {
            match record
                .write_all(line.as_bytes())
                .and_then(|()| record.flush())
            {
                Ok(()) => session.record_bytes += line.len() as u64,
                Err(error) => eprintln!("kvlint proxy: recording session {}: {error}", index + 1),
            }
        }
    }
}
