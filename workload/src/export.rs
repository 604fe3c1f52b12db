//! Benchmark datasets with a workload's shape, and benchmark datasets read back as workloads.
//!
//! [`export`] writes, per request in arrival order, a prompt of random words with the
//! request's length, and the same leading words as the requests it shares a prefix with: its
//! session's previous request (to the token) and any request with the same leading blocks
//! (to the block). Each word is one token of the tokenizer (checked), written with a leading
//! space, so that the prompt's tokens are its words: no text of the workload leaves, and the
//! exported prompts share what the workload's shared. [`dataset_trace`] reads such a dataset
//! (or any benchmark's: vLLM's custom JSONL, ShareGPT, GuideLLM) back into a trace, each prompt
//! tokenized as it is, so that `kvlint workload` measures its sharing.

use std::collections::HashMap;
use std::io::Write;

use kvlint_render::tokenize::Tokenizer;
use serde_json::{Value, json};

use kvlint_fleet::{Blocks, NewRequest, Trace, TraceBuilder, arrival_order};

/// The formats [`export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `vllm bench serve --dataset-name custom`: JSONL of `{"prompt", "output_tokens"}`.
    VllmCustom,
    /// ShareGPT JSON (`vllm bench serve --dataset-name sharegpt`): each request a human turn
    /// and a model turn of its output's length.
    ShareGpt,
    /// GuideLLM: JSONL of `{"prompt", "prompt_tokens_count", "output_tokens_count"}`.
    GuideLlm,
    /// JSONL of chat requests with their session and arrival time (seconds from the first).
    ChatJsonl,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Self::VllmCustom => "vllm-custom",
            Self::ShareGpt => "sharegpt",
            Self::GuideLlm => "guidellm",
            Self::ChatJsonl => "chat-jsonl",
        }
    }
}

/// Common English words; those the tokenizer reads as one token after a space are used.
const WORDS: &str = "time year people way day man thing woman life child world school state \
family student group country problem hand part place case week company system program question \
work government number night point home water room mother area money story fact month lot right \
study book eye job word business issue side kind head house service friend father power hour game \
line end member law car city community name president team minute idea kid body information back \
parent face others level office door health person art war history party result change morning \
reason research girl guy moment air teacher force education foot boy age policy music market sense \
nation plan college interest death experience effect use class control care field development role \
effort rate heart drug show leader light voice wife police mind price report decision son view \
relationship town road arm difference value building action model season society tax director \
position player record paper space ground form event official matter center couple site project \
activity star table need court oil situation cost industry figure street image phone data picture \
practice piece land product doctor wall patient worker news test movie north love support technology \
step baby computer type attention film tree source organization hair window evidence population \
site truth lead green blue red small large old new good great little long high open public sure \
free full strong clear true whole ready simple";

/// The words of [`WORDS`] that `tokenizer` reads as exactly one token after a space.
pub fn single_token_words(tokenizer: &Tokenizer) -> Vec<&'static str> {
    let mut words: Vec<&'static str> = WORDS
        .split_whitespace()
        .filter(|word| tokenizer.encode_uncached(&format!(" {word}")).len() == 1)
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// A word chosen by a seed.
fn word(words: &[&'static str], seed: u64, position: u64) -> u16 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..].copy_from_slice(&position.to_le_bytes());
    let hash = blake3::hash(&bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_bytes()[..8]);
    (u64::from_le_bytes(first) % words.len() as u64) as u16
}

/// Makes the word at `at` differ from `previous`'s there, so that a prompt shares no more with
/// the one before than it did.
fn distinct_after(words: &mut [u16], at: usize, previous: &[u16], choices: usize) {
    if let (Some(word), Some(before)) = (words.get_mut(at), previous.get(at))
        && *word == *before
    {
        *word = ((usize::from(*word) + 1) % choices) as u16;
    }
}

/// The problem with writing an export.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ExportError {
    #[error("the tokenizer `{0}` reads too few common words as one token to write random text")]
    #[diagnostic(code(kvlint::workload::export))]
    Vocabulary(String),
    #[error("writing the benchmark: {0}")]
    #[diagnostic(code(kvlint::workload::export))]
    Io(#[from] std::io::Error),
}

/// Writes `trace` as a benchmark dataset in `format` to `out`, prompts of random words that
/// `tokenizer` reads one token each.
pub fn export(
    trace: &Trace,
    tokenizer: &Tokenizer,
    format: Format,
    out: &mut impl Write,
) -> Result<usize, ExportError> {
    let words = single_token_words(tokenizer);
    if words.len() < 64 {
        return Err(ExportError::Vocabulary(tokenizer.name().to_owned()));
    }
    let origin = trace
        .requests
        .iter()
        .filter_map(|request| request.time)
        .fold(f64::INFINITY, f64::min);
    let mut previous_words: HashMap<u32, Vec<u16>> = HashMap::new();
    // Blocks seen so far, and the words of those a request left its previous one in.
    let mut seen: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut mixed: HashMap<u64, Vec<u16>> = HashMap::new();
    let mut session_blocks: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut first_item = true;
    if format == Format::ShareGpt {
        out.write_all(b"[\n")?;
    }
    let mut written = 0;
    for index in arrival_order(trace) {
        let request = &trace.requests[index];
        let blocks = session_blocks.entry(request.session).or_default();
        trace.next_prompt_blocks(index, blocks);
        let block_size = trace.block_size as usize;
        let length = request.input_tokens as usize;
        let previous = previous_words.remove(&request.session).unwrap_or_default();
        let shared = (request.shared_with_previous as usize).min(previous.len());
        let mut prompt: Vec<u16> = Vec::with_capacity(length);
        for (block, hash) in blocks.iter().enumerate() {
            let start = block * block_size;
            let words_of_block: Vec<u16> = if let Some(known) = mixed.get(hash) {
                known.clone()
            } else if seen.contains(hash) || start >= shared {
                (0..block_size)
                    .map(|offset| word(&words, *hash, offset as u64))
                    .collect()
            } else {
                // The block the request leaves its session's previous one in: the shared
                // words, then its own; kept, so that wherever it comes again it is the same.
                let mut built: Vec<u16> = (0..block_size)
                    .map(|offset| {
                        let position = start + offset;
                        if position < shared {
                            previous[position]
                        } else {
                            word(&words, *hash, offset as u64)
                        }
                    })
                    .collect();
                distinct_after(&mut built, shared - start, &previous[start..], words.len());
                mixed.insert(*hash, built.clone());
                built
            };
            seen.insert(*hash);
            prompt.extend(words_of_block);
        }
        // The words after the last whole block: the shared ones, then words seeded by the
        // last block (equal prompts end alike; a tail is never matched across sessions).
        let tail_seed = blocks.last().copied().unwrap_or(0) ^ 0x5eed;
        let tail_start = prompt.len();
        prompt.extend((tail_start..length).map(|position| {
            previous
                .get(position)
                .copied()
                .filter(|_| position < shared)
                .unwrap_or_else(|| word(&words, tail_seed, position as u64))
        }));
        if shared >= tail_start && shared < length {
            let tail = &mut prompt[tail_start..];
            distinct_after(
                tail,
                shared - tail_start,
                &previous[tail_start..],
                words.len(),
            );
        }
        let text: String = prompt
            .iter()
            .map(|chosen| format!(" {}", words[usize::from(*chosen)]))
            .collect();
        // An output length the recording does not give is left to the load generator's own
        // setting (`--custom-output-len`, GuideLLM's output-tokens option).
        let output = (request.output_tokens > 0).then_some(request.output_tokens);
        let mut line = match format {
            Format::VllmCustom => json!({"prompt": text}),
            Format::GuideLlm => json!({"prompt": text, "prompt_tokens_count": length}),
            Format::ShareGpt => {
                let answer: String = (0..output.unwrap_or(0))
                    .map(|position| {
                        format!(
                            " {}",
                            words[usize::from(word(&words, !(index as u64), u64::from(position)))]
                        )
                    })
                    .collect();
                json!({"id": format!("request-{index}"), "conversations": [
                    {"from": "human", "value": text},
                    {"from": "gpt", "value": answer.trim_start()}]})
            }
            Format::ChatJsonl => {
                let mut line = json!({
                    "session": request.session,
                    "request": {"messages": [{"role": "user", "content": text}]}});
                if let Some(time) = request.time {
                    line["time"] = json!(time - origin);
                }
                line
            }
        };
        if let Some(output) = output {
            match format {
                Format::VllmCustom => line["output_tokens"] = json!(output),
                Format::GuideLlm => line["output_tokens_count"] = json!(output),
                Format::ChatJsonl => line["request"]["max_tokens"] = json!(output),
                Format::ShareGpt => {}
            }
        }
        if format == Format::ShareGpt {
            if !first_item {
                out.write_all(b",\n")?;
            }
            first_item = false;
        }
        serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::other)?;
        if format != Format::ShareGpt {
            out.write_all(b"\n")?;
        }
        written += 1;
        let session = &trace.sessions[request.session as usize];
        if index + 1 < session.requests.end as usize {
            previous_words.insert(request.session, prompt);
        } else {
            session_blocks.remove(&request.session);
        }
    }
    if format == Format::ShareGpt {
        out.write_all(b"\n]\n")?;
    }
    Ok(written)
}

/// One entry of a benchmark dataset: its prompt, session and time, when it says.
struct Entry {
    prompt: String,
    session: Option<String>,
    output_tokens: u32,
    time: Option<f64>,
}

/// Reads a benchmark dataset: JSONL with a `prompt` (vLLM custom, GuideLLM), JSONL of chat
/// requests (`request.messages` or `messages`, joined), or ShareGPT JSON (the first human
/// turn). `None` when `text` is none of these.
fn dataset_entries(text: &str) -> Option<Vec<Entry>> {
    let trimmed = text.trim_start();
    let documents: Vec<Value> = if trimmed.starts_with('[') {
        serde_json::from_str::<Vec<Value>>(trimmed).ok()?
    } else {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .ok()?
    };
    documents
        .iter()
        .map(|document| {
            let number = |key: &str| {
                document
                    .get(key)
                    .and_then(Value::as_u64)
                    .and_then(|value| u32::try_from(value).ok())
            };
            let prompt = if let Some(prompt) = document.get("prompt").and_then(Value::as_str) {
                prompt.to_owned()
            } else if let Some(turns) = document.get("conversations").and_then(Value::as_array) {
                turns
                    .iter()
                    .find(|turn| turn.get("from").and_then(Value::as_str) == Some("human"))?
                    .get("value")?
                    .as_str()?
                    .to_owned()
            } else {
                let messages = document
                    .pointer("/request/messages")
                    .or_else(|| document.get("messages"))?
                    .as_array()?;
                messages
                    .iter()
                    .filter_map(|message| message.get("content")?.as_str())
                    .collect()
            };
            Some(Entry {
                prompt,
                session: document.get("session").map(|session| match session {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                }),
                output_tokens: number("output_tokens")
                    .or_else(|| number("output_tokens_count"))
                    .or_else(|| {
                        document
                            .pointer("/request/max_tokens")
                            .and_then(Value::as_u64)
                            .and_then(|value| u32::try_from(value).ok())
                    })
                    .unwrap_or(0),
                time: document.get("time").and_then(Value::as_f64),
            })
        })
        .collect()
}

/// A benchmark dataset as a trace: each prompt tokenized as it is (no chat template), in the
/// file's order; entries with a `session` grouped by it (that id is the session's identity),
/// the others each their own session (`name`, the dataset's file name, and its line).
/// `None` when `text` is not a benchmark dataset.
pub fn dataset_trace(
    name: &str,
    text: &str,
    tokenizer: &Tokenizer,
    block_size: u32,
) -> Option<Trace> {
    let entries = dataset_entries(text)?;
    let mut builder = TraceBuilder::new(block_size, tokenizer.name());
    // Per session key: its number, and its previous prompt's tokens.
    let mut open: HashMap<String, (u32, Vec<u32>)> = HashMap::new();
    for (position, entry) in entries.into_iter().enumerate() {
        let key = entry
            .session
            .clone()
            .unwrap_or_else(|| format!("#{position}"));
        let ids = tokenizer.encode_uncached(&entry.prompt).ids();
        let (session, previous) = open.remove(&key).unwrap_or_else(|| {
            let identity = match &entry.session {
                Some(session) => session.clone(),
                None => format!("{name}:{}", position + 1),
            };
            (builder.open(identity, 0), Vec::new())
        });
        let shared = kvlint_protocol::common_slice_prefix_len(&previous, &ids);
        let kept = builder.kept_by_tokens(session, shared);
        builder.push(
            session,
            &NewRequest {
                time: entry.time,
                input_tokens: ids.len() as u32,
                output_tokens: entry.output_tokens,
                shared_with_previous: shared as u32,
                shared_with_previous_sequence: shared as u32,
                kept_blocks: kept,
                blocks: Blocks::Tokens {
                    prompt: &ids[kept * builder.block_size() as usize..],
                    generated: &[],
                },
                finding: None,
            },
        );
        open.insert(key, (session, ids));
    }
    Some(builder.finish())
}
