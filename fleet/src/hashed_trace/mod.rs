//! Hashed traces: a workload as the fleet tools exchange it, per request its lengths, its time
//! and its prompt as a list of block ids, no text. [`export_hashed`] writes a [`Trace`] in
//! one of the published forms ([`HashedFormat`]); [`read_hashed`] reads those forms back
//! into a trace, so that `kvlint workload` and `kvlint simulate` run on a trace a team cannot
//! share in text.
//!
//! # The ids
//!
//! A trace's blocks are the engine's: each full block of `block_size` prompt tokens keyed by
//! a hash of its tokens chained over the blocks before it ([`crate::chain_hash`], as vLLM's
//! prefix caching keys its blocks: `vllm/v1/core/kv_cache_utils.py`, `hash_block_tokens`), so
//! that an equal hash means an equal prefix. On export each hash becomes a small integer, in
//! the order the workload first sends it (0, 1, 2, …): the published traces' anonymization
//! (Mooncake's `FAST25-release/README.md`: "the remapped block hash"; Bailian's `README.md`:
//! "Map hash values to sequential integers"). No token and no text leaves.
//!
//! The published traces give a prompt `ceil(input_length / block_size)` ids: its last,
//! partial block has one too (Mooncake's `conversation_trace.jsonl`: 6758 tokens, 14 ids of
//! 512). An engine's prefix cache never keys a partial block, so kvlint gives it an id of its
//! own that no other request has: never served from a cache, as on the engine.
//!
//! A trace kept at one block size yields blocks of any multiple of it exactly: the hash of
//! every k-th block names the prefix that ends there ([`rebinned`]). Any other size needs the
//! sessions traced again at that size (`--block-size` with the session files).
//!
//! Reading back, a request's first `input_length / block_size` ids are its full blocks; its
//! partial block's id, when the file gives one, is left out as the engine leaves it out. The
//! ids are chained again (each block's hash covers the ids before it: [`crate::TraceBuilder`] chains them), so that a
//! trace whose ids name a block's content alone (Bailian's per-block SipHash) is matched by
//! prefix, as an engine matches it; kvlint's own ids, prefix ids already, keep their sharing
//! exactly. Token-level sharing is not in any hashed trace: a request shares with its
//! session's previous one its common leading blocks.
//!
//! A Mooncake trace in time order can also be read as it goes, for a simulation of millions
//! of requests ([`StreamedTrace`]).
//!
//! # The formats
//!
//! - **`mooncake`**: JSON Lines as Mooncake published them (`kvcache-ai/Mooncake`,
//!   `FAST25-release/README.md` and `FAST25-release/traces/conversation_trace.jsonl`), read by
//!   AIPerf's `MooncakeTraceDatasetLoader` (`ai-dynamo/aiperf`,
//!   `src/aiperf/dataset/loader/mooncake_trace.py`, fields in `loader/models.py`,
//!   `MooncakeTrace`) and Dynamo's trace tools. 512-token blocks by default.
//!   - `timestamp`: when the request arrived, in milliseconds since the workload's first
//!     request (left out when the recording has no time for it);
//!   - `input_length`: prompt tokens, as the engine's tokenizer and chat template give them;
//!   - `output_length`: tokens generated (the response's reported usage, else its text
//!     tokenized);
//!   - `hash_ids`: the prompt's block ids, as above.
//!
//!   Each line is its own conversation to AIPerf; kvlint reads them so too.
//! - **`mooncake-agentic`**: the same lines with AIPerf's multi-turn fields (`MooncakeTrace`:
//!   `session_id`, `delay`): `session_id` the session's number (`session-N`, in order of first
//!   request; never its key or file name), `timestamp` on a session's first request only and
//!   `delay` on the others: milliseconds since the session's previous request was sent (the
//!   recording keeps when a request was sent, not when its answer ended, so the delay holds
//!   the previous request's own serving time too).
//! - **`bailian`**: JSON Lines as Alibaba published the Qwen-Bailian traces
//!   (`alibaba-edu/qwen-bailian-usagetraces-anon`, `README.md`, "Data Specification"), read by
//!   AIPerf's `BailianTraceDatasetLoader` (`loader/bailian_trace.py`). 16-token blocks.
//!   - `chat_id`: the request's number in the file (0, 1, …);
//!   - `parent_chat_id`: its session's previous request's `chat_id`, `-1` for a session's
//!     first request (the trace keeps no link from a sub-agent's session to its parent's: a
//!     sub-agent's first request is a root);
//!   - `timestamp`: seconds since the workload's first request;
//!   - `input_length`, `output_length`, `hash_ids`: as for Mooncake;
//!   - `type`: `"text"` (the trace does not keep which requests carried images or files);
//!   - `turn`: the request's turn in its session, from 1.
//! - **`weka`**: the Claude Code traces AIPerf reads (`loader/weka_trace.py` and
//!   `loader/weka_trace_models.py`, `WekaTrace`): one JSON object per conversation, written
//!   one per line (or, with `-o DIR`, one file per conversation, as AIPerf reads a folder).
//!   64-token blocks by default.
//!   - `id`: the session's number (`session-N`);
//!   - `models`: the renderer the prompts were counted with (the trace keeps no model name);
//!   - `block_size`: tokens per block;
//!   - `hash_id_scope`: `"local"`: ids are numbered within the conversation (from 0), the
//!     only scope AIPerf reads, so sharing across conversations is not in this format;
//!   - `requests[]`, each `{"t", "type": "n", "model", "in", "out", "hash_ids"}`: `t` seconds
//!     since the workload's first request (a request without a time: its session's previous
//!     `t`, 0 for a first, as `t` is required), `in` and `out` prompt and output tokens.
//!     `think_time` is left out: the recording does not say when an answer ended.
//!
//! - **`lmcache`**: LMCache's lookup-hash log (`LMCache/LMCache`,
//!   `lmcache/tools/cache_simulator/README.md`, "Step 1: Enable Lookup Hash Logging"), read by
//!   its cache simulator (`simulator.py`, `load_lookup_events`). 256-token chunks by default.
//!   - `timestamp`: seconds since the workload's first request (left out without a time);
//!   - `request_id`: `request-N`, the request's number in the file;
//!   - `model_name`: the renderer the prompts were counted with;
//!   - `chunk_size`, `seq_len`: tokens per chunk, prompt tokens;
//!   - `dtypes`, `shapes`: empty (the KV cache's layout is the model's, not the workload's:
//!     give the simulator `--kv-bytes-per-chunk`);
//!   - `chunk_hashes`: the full chunks' ids as hex strings (`"0x2a"`): LMCache looks up whole
//!     chunks only, so a prompt's partial chunk has none.
//!
//!   Each line is a session of its own when read back (the log has none).
//!
//! Not done: the agentic rows of Dynamo's `agent_trace_to_mooncake` (`request_id`,
//! `wait_for`, `tool_wait_ms`: measured from when the awaited request ended and how long its
//! tools ran, which the trace does not keep).

mod bailian;
mod lmcache;
mod mooncake;
mod read;
mod stream;
mod weka;

pub use read::read_hashed;
use read::{PreviousIds, ReadRequest, Record, check_ids, detect, numbered_lines};
pub use stream::{StreamedRequest, StreamedTrace};

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;

use crate::trace::{Trace, TraceRequest, arrival_order};

/// The hashed-trace forms kvlint writes and reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashedFormat {
    Mooncake,
    MooncakeAgentic,
    Bailian,
    Weka,
    Lmcache,
}

impl HashedFormat {
    /// Every form, in the order the documentation lists them.
    pub const ALL: [Self; 5] = [
        Self::Mooncake,
        Self::MooncakeAgentic,
        Self::Bailian,
        Self::Weka,
        Self::Lmcache,
    ];

    /// The form named `name` (as [`HashedFormat::name`] gives it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Mooncake => "mooncake",
            Self::MooncakeAgentic => "mooncake-agentic",
            Self::Bailian => "bailian",
            Self::Weka => "weka",
            Self::Lmcache => "lmcache",
        }
    }

    /// Tokens per block id in the published traces of this form.
    pub fn default_block_size(self) -> u32 {
        match self {
            Self::Mooncake | Self::MooncakeAgentic => 512,
            Self::Bailian => 16,
            Self::Weka => 64,
            // LMCache's default chunk size.
            Self::Lmcache => 256,
        }
    }
}

/// A hashed trace that cannot be written or read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum HashedTraceError {
    #[error("{path}:{line}: {reason}")]
    #[diagnostic(
        code(kvlint::workload::hashed_trace),
        help(
            "a hashed trace is JSON Lines of Mooncake or Bailian requests, LMCache lookups, or Claude Code (weka) conversations"
        )
    )]
    Line {
        path: String,
        line: usize,
        reason: String,
    },
    #[error(
        "{path}: not a hashed trace (Mooncake, Bailian, Claude Code conversations, LMCache lookups)"
    )]
    #[diagnostic(code(kvlint::workload::hashed_trace))]
    Unknown { path: String },
    #[error("blocks of {requested} tokens cannot be derived from a trace of {trace}-token blocks")]
    #[diagnostic(
        code(kvlint::workload::hashed_trace),
        help(
            "a trace yields blocks of any multiple of its own size; trace the sessions again at {requested} tokens (`--block`), or use a multiple of {trace}"
        )
    )]
    BlockSize { trace: u32, requested: u32 },
    #[error("reading {path}: {reason}")]
    #[diagnostic(code(kvlint::workload::hashed_trace))]
    Read { path: String, reason: String },
    #[error("writing the trace: {0}")]
    #[diagnostic(code(kvlint::workload::hashed_trace))]
    Io(#[from] std::io::Error),
}

/// One request of a hashed trace, as every form writes it, in the order the workload sent it.
#[derive(Clone, Debug, PartialEq)]
pub struct HashedRequest {
    /// Its session's number, in order of the sessions' first requests.
    pub session: u32,
    /// Its turn in the session, from 0.
    pub turn: u32,
    /// Its session's previous request, an index into the exported requests.
    pub previous: Option<usize>,
    /// Seconds since the workload's first request, when the recording says.
    pub time: Option<f64>,
    pub input_length: u32,
    pub output_length: u32,
    /// Block ids, small integers in first-seen order; the last one a partial block's when
    /// `input_length` is not a whole number of blocks.
    pub hash_ids: Vec<u64>,
}

/// The requests of `trace` in arrival order with their block ids at `block_size` tokens.
pub fn hashed_requests(
    trace: &Trace,
    block_size: u32,
) -> Result<Vec<HashedRequest>, HashedTraceError> {
    let rebinned_trace;
    let trace = if block_size == trace.block_size {
        trace
    } else {
        rebinned_trace = rebinned(trace, block_size)?;
        &rebinned_trace
    };
    let origin = trace
        .requests
        .iter()
        .filter_map(|request| request.time)
        .fold(f64::INFINITY, f64::min);
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut next_id = 0u64;
    let mut session_blocks: HashMap<u32, (usize, Vec<u64>)> = HashMap::new();
    let mut session_numbers: HashMap<u32, (u32, u32, usize)> = HashMap::new();
    let mut hashed = Vec::with_capacity(trace.requests.len());
    for index in arrival_order(trace) {
        let request = &trace.requests[index];
        // The session's previous request's blocks continued (recomputed from the session's
        // start when its requests did not arrive in order).
        let blocks = match session_blocks.remove(&request.session) {
            Some((last, mut blocks)) if last + 1 == index => {
                trace.next_prompt_blocks(index, &mut blocks);
                blocks
            }
            _ => trace.prompt_blocks(index),
        };
        let mut hash_ids: Vec<u64> = blocks
            .iter()
            .map(|hash| {
                *ids.entry(*hash).or_insert_with(|| {
                    next_id += 1;
                    next_id - 1
                })
            })
            .collect();
        if !request.input_tokens.is_multiple_of(trace.block_size) {
            hash_ids.push(next_id);
            next_id += 1;
        }
        // Kept for the session's next request, if it has one.
        if trace.sessions[request.session as usize]
            .requests
            .contains(&(index as u32 + 1))
        {
            session_blocks.insert(request.session, (index, blocks));
        }
        let sessions_so_far = session_numbers.len() as u32;
        let (session, turn, previous) = match session_numbers.get_mut(&request.session) {
            Some((number, turns, last)) => {
                let previous = *last;
                *turns += 1;
                *last = hashed.len();
                (*number, *turns, Some(previous))
            }
            None => {
                session_numbers.insert(request.session, (sessions_so_far, 0, hashed.len()));
                (sessions_so_far, 0, None)
            }
        };
        hashed.push(HashedRequest {
            session,
            turn,
            previous,
            time: request.time.map(|time| time - origin),
            input_length: request.input_tokens,
            output_length: request.output_tokens,
            hash_ids,
        });
    }
    Ok(hashed)
}

/// Writes `trace` as a hashed trace in `format` with blocks of `block_size` tokens to `out`;
/// returns the requests written.
pub fn export_hashed(
    trace: &Trace,
    format: HashedFormat,
    block_size: u32,
    out: &mut impl Write,
) -> Result<usize, HashedTraceError> {
    let requests = hashed_requests(trace, block_size)?;
    match format {
        HashedFormat::Mooncake | HashedFormat::MooncakeAgentic => {
            mooncake::write(&requests, format == HashedFormat::MooncakeAgentic, out)?;
        }
        HashedFormat::Bailian => bailian::write(&requests, out)?,
        HashedFormat::Lmcache => lmcache::write(&requests, &trace.renderer, block_size, out)?,
        HashedFormat::Weka => {
            for conversation in weka::conversations(&requests, &trace.renderer, block_size) {
                serde_json::to_writer(&mut *out, &conversation).map_err(std::io::Error::other)?;
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(requests.len())
}

/// The conversations of the `weka` form, one JSON object each, for a folder of files.
pub fn weka_conversations(trace: &Trace, block_size: u32) -> Result<Vec<Value>, HashedTraceError> {
    let requests = hashed_requests(trace, block_size)?;
    Ok(weka::conversations(&requests, &trace.renderer, block_size))
}

/// `trace` with blocks of `block_size` tokens, a multiple of its own: the hash of every k-th
/// block names the prefix that ends there, so the coarser blocks are those hashes.
pub fn rebinned(trace: &Trace, block_size: u32) -> Result<Trace, HashedTraceError> {
    let fine = trace.block_size;
    if block_size < fine || !block_size.is_multiple_of(fine) {
        return Err(HashedTraceError::BlockSize {
            trace: fine,
            requested: block_size,
        });
    }
    let factor = (block_size / fine) as usize;
    let every_kth = |blocks: &[u64]| -> Vec<u64> {
        blocks
            .iter()
            .skip(factor - 1)
            .step_by(factor)
            .copied()
            .collect()
    };
    let mut coarse = Trace {
        block_size,
        renderer: trace.renderer.clone(),
        sessions: trace.sessions.clone(),
        requests: Vec::with_capacity(trace.requests.len()),
        blocks: Vec::new(),
        rules: trace.rules.clone(),
    };
    for session in &trace.sessions {
        let mut blocks = Vec::new();
        for index in session.requests.start as usize..session.requests.end as usize {
            trace.next_prompt_blocks(index, &mut blocks);
            // The generated blocks continue the prompt's chain over its partial block: the
            // coarse blocks of the two together, the prompt's first.
            let mut sequence = blocks.clone();
            sequence.extend_from_slice(trace.generated_blocks(index));
            let sequence = every_kth(&sequence);
            let prompt = blocks.len() / factor;
            let request = &trace.requests[index];
            let kept = (request.kept_blocks as usize / factor).min(prompt);
            let new_start = coarse.blocks.len() as u32;
            coarse.blocks.extend_from_slice(&sequence[kept..prompt]);
            let generated_start = coarse.blocks.len() as u32;
            coarse.blocks.extend_from_slice(&sequence[prompt..]);
            coarse.requests.push(TraceRequest {
                kept_blocks: kept as u32,
                new_blocks: new_start..generated_start,
                generated_blocks: generated_start..coarse.blocks.len() as u32,
                ..request.clone()
            });
        }
    }
    Ok(coarse)
}

/// Milliseconds rounded to the microsecond, as a JSON number.
fn milliseconds(seconds: f64) -> Value {
    round_json(seconds * 1000.0, 1000.0)
}

/// `value` rounded to `1 / scale`: an integer when it is one.
fn round_json(value: f64, scale: f64) -> Value {
    let rounded = (value * scale).round() / scale;
    if rounded.fract() == 0.0 && rounded.abs() < 9.0e15 {
        Value::from(rounded as i64)
    } else {
        Value::from(rounded)
    }
}

#[cfg(test)]
mod tests;
