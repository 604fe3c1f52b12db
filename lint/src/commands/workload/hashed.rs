//! `kvlint workload --export-trace` and `--hashed-trace`: the workload as a hashed trace in a
//! fleet tool's format, and hashed traces read as workloads (for `kvlint simulate` too).

use std::path::{Path, PathBuf};

use kvlint_fleet::Trace;
use kvlint_fleet::hashed_trace::{HashedFormat, export_hashed, read_hashed, weka_conversations};
use miette::{IntoDiagnostic, WrapErr};

use super::{TraceArgs, deliver};
use crate::commands::Outcome;
use crate::input::input_text;

/// The hashed-trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids.
    Mooncake,
    /// Mooncake JSONL with AIPerf's session_id and delay (ms).
    MooncakeAgentic,
    /// Qwen-Bailian JSONL: chat_id, parent_chat_id, timestamp (s), input_length,
    /// output_length, type, turn, hash_ids.
    Bailian,
    /// Claude Code conversations as AIPerf reads them: requests[] of t, in, out, hash_ids.
    Weka,
    /// LMCache's lookup-hash log: timestamp (s), request_id, chunk_size, seq_len,
    /// chunk_hashes (full chunks, hex strings).
    Lmcache,
}

impl TraceFormat {
    pub fn format(self) -> HashedFormat {
        match self {
            Self::Mooncake => HashedFormat::Mooncake,
            Self::MooncakeAgentic => HashedFormat::MooncakeAgentic,
            Self::Bailian => HashedFormat::Bailian,
            Self::Weka => HashedFormat::Weka,
            Self::Lmcache => HashedFormat::Lmcache,
        }
    }
}

/// The `--hashed-trace` files (a folder: its files, in name order), each read as a trace at
/// its own block size.
pub fn hashed_traces(args: &TraceArgs) -> miette::Result<Vec<Trace>> {
    let mut files = Vec::new();
    for path in &args.hashed_trace {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .into_diagnostic()
                .wrap_err_with(|| format!("reading {}", path.display()))?
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|entry| entry.is_file())
                .collect();
            entries.sort();
            files.extend(entries);
        } else {
            files.push(path.clone());
        }
    }
    files
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path)
                .into_diagnostic()
                .wrap_err_with(|| format!("reading {}", path.display()))?;
            let name = path.display().to_string();
            let text = input_text(name.clone(), bytes).map_err(miette::Report::new)?;
            read_hashed(
                &name,
                &text,
                args.hashed_format.map(TraceFormat::format),
                args.hashed_block,
            )
            .map_err(miette::Report::new)
        })
        .collect()
}

/// Writes `trace` as a hashed trace to `output` (a folder of conversations for `weka`), or
/// returns it for standard output.
pub fn export_trace(
    trace: &Trace,
    format: HashedFormat,
    block: u32,
    output: Option<&Path>,
) -> miette::Result<Outcome> {
    let written = match (format, output) {
        (HashedFormat::Weka, Some(folder)) => {
            let conversations = weka_conversations(trace, block).map_err(miette::Report::new)?;
            std::fs::create_dir_all(folder)
                .into_diagnostic()
                .wrap_err_with(|| format!("creating {}", folder.display()))?;
            // Numbers padded to one width, so that the files list in the sessions' order.
            let width = conversations.len().saturating_sub(1).to_string().len();
            for (number, conversation) in conversations.iter().enumerate() {
                let path = folder.join(format!("session-{number:0width$}.json"));
                let mut text = serde_json::to_string(conversation).into_diagnostic()?;
                text.push('\n');
                std::fs::write(&path, text)
                    .into_diagnostic()
                    .wrap_err_with(|| format!("writing {}", path.display()))?;
            }
            trace.requests.len()
        }
        _ => {
            let mut buffer = Vec::new();
            let written =
                export_hashed(trace, format, block, &mut buffer).map_err(miette::Report::new)?;
            let text = String::from_utf8(buffer).into_diagnostic()?;
            let shown = deliver(output, text)?;
            if output.is_none() {
                return Ok(Outcome {
                    output: shown,
                    exit_code: 0,
                });
            }
            written
        }
    };
    eprintln!(
        "kvlint workload: {written} requests written as a {} trace of {block}-token blocks",
        format.name()
    );
    Ok(Outcome {
        output: String::new(),
        exit_code: 0,
    })
}
