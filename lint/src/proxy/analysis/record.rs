//! The session files written with `--record`: one `{request, response}` line per exchange,
//! what `kvlint check` reads, in numbered parts past a size.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::proxy::Exchange;

/// A session's record goes on in a new file (`session-0007.2.jsonl`, …) past this size.
const RECORD_PART_BYTES: u64 = 256 << 20;

/// Where and how the sessions are recorded (`--record`, `--redact`).
pub(super) struct Recorder {
    folder: Option<PathBuf>,
    /// `--redact`: the key of this run's placeholders.
    redact: Option<std::hash::RandomState>,
    pub(super) part_bytes: u64,
}

/// One session's record: its current file, the bytes in it, and which part of the record
/// that file is.
#[derive(Default)]
pub(super) struct Record {
    file: Option<BufWriter<File>>,
    bytes: u64,
    part: usize,
}

impl Recorder {
    pub(super) fn new(folder: Option<PathBuf>, redact: bool) -> Self {
        Self {
            folder,
            redact: redact.then(std::hash::RandomState::new),
            part_bytes: RECORD_PART_BYTES,
        }
    }

    pub(super) fn is_on(&self) -> bool {
        self.folder.is_some()
    }

    /// Appends the exchange to the file of session `index` as `{request, response}`, what
    /// `kvlint check` reads; the request's headers (keys included) are never written.
    pub(super) fn record(
        &self,
        record: &mut Record,
        index: usize,
        body: &Value,
        (response, response_text): (Option<Value>, &str),
        exchange: &Exchange,
        replica: Option<String>,
    ) {
        let Some(folder) = self.folder.as_ref() else {
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
        let full = record.bytes > 0 && record.bytes + line.len() as u64 > self.part_bytes;
        if record.file.is_none() || full {
            record.part += 1;
            record.bytes = 0;
            let name = match record.part {
                1 => format!("session-{:04}.jsonl", index + 1),
                part => format!("session-{:04}.{part}.jsonl", index + 1),
            };
            let path = folder.join(name);
            record.file = match File::create(&path) {
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
        if let Some(file) = record.file.as_mut() {
            match file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
                Ok(()) => record.bytes += line.len() as u64,
                Err(error) => eprintln!("kvlint proxy: recording session {}: {error}", index + 1),
            }
        }
    }
}
