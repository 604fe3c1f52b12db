//! Anthropic's prefix check of the thinking blocks a request sends back
//! ([`kvlint_protocol::thinking`] holds the documented facts): which block fails it first, why,
//! and what the API does with the request. The rule `thinking-prefix-check` words it.
//!
//! The turn before is the reference: each thinking block the request sends back was produced
//! by an earlier request of the session, and that request's `system`, `tools` and `messages`
//! before the block are its prefix. Values are compared as the documentation says: JSON
//! values, not their formatting or key order, without the `cache_control` markers; the
//! parameters outside `system`, `tools` and `messages` do not count, nor a tool added with
//! `defer_loading`, nor thinking blocks removed from the start or the end of the history.

use kvlint_protocol::BodyFormat;
use kvlint_protocol::thinking::{
    MismatchBehavior, ThinkingModel, is_thinking_block, reads_blocks_of,
};
use kvlint_render::render::Rendered;
use kvlint_request::path::PartPath;
use kvlint_request::request::Request;
use serde_json::Value;

/// A request whose returned thinking blocks (Anthropic) or reasoning items (OpenAI) fail the
/// API's prefix check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThinkingIssue {
    pub turn: usize,
    /// What is sent back: `thinking block` or `reasoning item`.
    pub item: &'static str,
    /// The first failing block (`messages[3].content[0]`).
    pub block: PartPath,
    pub cause: ThinkingCause,
    pub outcome: ThinkingOutcome,
    /// The model the request names.
    pub model: String,
    /// Thinking blocks that fail with it: it and every later one.
    pub failing_blocks: usize,
    /// Their tokens, as rendered.
    pub failing_tokens: usize,
}

/// What invalidated the first failing block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThinkingCause {
    /// The top-level `system` changed.
    System,
    /// A tool was added, removed, renamed or edited.
    Tool { name: String },
    /// An earlier message was edited, reordered or deleted: the first place that differs.
    Message { place: PartPath },
    /// A thinking block between others was left out (or blocks at the end, with newer ones
    /// after them).
    BlockLeftOut,
    /// A thinking block is sent in another order than it was produced.
    BlockMoved,
    /// A thinking block this conversation had removed, or never had, is sent.
    BlockPutBack,
    /// The block's signature is the one of a block with other content: a tampered or
    /// re-signed block, which fails whatever the request asks.
    Tampered,
    /// The block was produced by a model the requested model does not read.
    Unreadable { producer: String },
    /// OpenAI: the request names an earlier model version than the turn before.
    Downgrade { from: String },
    /// OpenAI: the end user (`user`, `safety_identifier`) is another than the turn before's.
    EndUserChanged,
}

/// What the API does with the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingOutcome {
    /// Refused with a 400.
    Refused(Enforcement),
    /// The failing blocks are dropped and the request succeeds (`drop_block`, or a block the
    /// model cannot read, dropped without an error).
    Dropped,
    /// Let through: an account created before the check was on by default, and a request
    /// that does not ask for it (listed as `thinking_mismatch_allowed`). Newer accounts get a
    /// 400.
    Allowed,
}

/// The Anthropic account a session runs on, as far as kvlint is told (`kvlint.toml`'s
/// `anthropic-account-created`): its creation date decides whether the prefix check is on by
/// default ([`kvlint_protocol::thinking::ENFORCED_FOR_ACCOUNTS_FROM`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Account {
    /// Not told: assumed created on or after that day (the check on), and the finding says so.
    #[default]
    Unknown,
    /// Created before it: the check applies where a request sets the behaviour, and on Fable
    /// 5.2 and Mythos 5.2.
    CreatedBefore,
    /// Created on or after it: the check is on.
    CreatedOnOrAfter,
}

impl Account {
    /// The account created on `date` (`YYYY-MM-DD`); `None` for another form.
    pub fn created_on(date: &str) -> Option<Self> {
        let bytes = date.as_bytes();
        let well_formed = bytes.len() == 10
            && bytes.iter().enumerate().all(|(index, byte)| match index {
                4 | 7 => *byte == b'-',
                _ => byte.is_ascii_digit(),
            });
        well_formed.then(|| {
            if date < kvlint_protocol::thinking::ENFORCED_FOR_ACCOUNTS_FROM {
                Self::CreatedBefore
            } else {
                Self::CreatedOnOrAfter
            }
        })
    }
}

/// Why the check applies to the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// The body sets `prefix_mismatch_behavior: "error"`, or the block is tampered (always
    /// refused).
    Always,
    /// The model checks on every account (Claude Fable 5.2, Mythos 5.2).
    EveryAccount,
    /// Assumed: an account created on or after
    /// [`kvlint_protocol::thinking::ENFORCED_FOR_ACCOUNTS_FROM`], where the check is on by
    /// default (older accounts pass the request unless it sets the behaviour).
    AssumedNewAccount,
    /// The account was created on or after that day, as configured.
    NewAccount,
}

/// A thinking block of a request: where, and what identifies it.
struct Block<'a> {
    message: usize,
    content: usize,
    /// Its `signature` (`thinking`) or `data` (`redacted_thinking`).
    key: Option<&'a str>,
    value: &'a Value,
}

/// The prefix check of the thinking blocks `current` sends back, with `previous` the turn
/// before it, on `account`; `None` when every block passes, the model does not check, or the
/// request is not an Anthropic Messages request.
pub fn replayed_thinking(
    previous: &Request,
    current: &Request,
    current_rendered: &Rendered,
    turn: usize,
    account: Account,
) -> Option<ThinkingIssue> {
    if previous.format != BodyFormat::AnthropicMessages
        || current.format != BodyFormat::AnthropicMessages
    {
        return None;
    }
    let model = current.body.get("model")?.as_str()?;
    let checking = ThinkingModel::of(model)?;
    let blocks = thinking_blocks(&current.body);
    if blocks.is_empty() {
        return None;
    }
    let earlier_blocks = thinking_blocks(&previous.body);
    let (first, cause) = first_failing(previous, current, &blocks, &earlier_blocks)?;
    let outcome = match (&cause, MismatchBehavior::requested(&current.body)) {
        (ThinkingCause::Tampered, _) | (_, Some(MismatchBehavior::Error)) => {
            ThinkingOutcome::Refused(Enforcement::Always)
        }
        (ThinkingCause::Unreadable { .. }, _) | (_, Some(MismatchBehavior::DropBlock)) => {
            ThinkingOutcome::Dropped
        }
        _ if checking.enforced_on_every_account() => {
            ThinkingOutcome::Refused(Enforcement::EveryAccount)
        }
        _ => match account {
            Account::Unknown => ThinkingOutcome::Refused(Enforcement::AssumedNewAccount),
            Account::CreatedOnOrAfter => ThinkingOutcome::Refused(Enforcement::NewAccount),
            Account::CreatedBefore => ThinkingOutcome::Allowed,
        },
    };
    let failing = &blocks[first..];
    let failing_tokens = failing
        .iter()
        .map(|block| tokens_of(current, current_rendered, &block_path(block)))
        .sum();
    Some(ThinkingIssue {
        turn,
        item: "thinking block",
        block: block_path(&blocks[first]),
        cause,
        outcome,
        model: model.to_owned(),
        failing_blocks: failing.len(),
        failing_tokens,
    })
}

/// The first of `blocks` that fails, by its index, and why: the earliest in the request of
/// the block a change before it invalidates, the first block out of the produced order, and
/// the first tampered one; every block when the model cannot read the turn before's model's.
fn first_failing(
    previous: &Request,
    current: &Request,
    blocks: &[Block<'_>],
    earlier_blocks: &[Block<'_>],
) -> Option<(usize, ThinkingCause)> {
    let model = current.body.get("model").and_then(Value::as_str)?;
    if let Some(producer) = previous.body.get("model").and_then(Value::as_str)
        && reads_blocks_of(model, producer) == Some(false)
    {
        let producer = producer.to_owned();
        return Some((0, ThinkingCause::Unreadable { producer }));
    }
    let sent_before = messages(&previous.body).len();
    let mut candidates: Vec<(usize, ThinkingCause)> = Vec::new();
    if let Some((position, cause)) = first_edit(&previous.body, &current.body) {
        // The blocks after the change: their prefix holds it.
        if let Some(index) = blocks
            .iter()
            .position(|block| (block.message, block.content) >= position)
        {
            candidates.push((index, cause));
        }
    }
    candidates.extend(out_of_order(blocks, earlier_blocks, sent_before));
    candidates.extend(
        blocks
            .iter()
            .position(|block| {
                earlier_blocks.iter().any(|earlier| {
                    earlier.key.is_some()
                        && earlier.key == block.key
                        && earlier.value != block.value
                })
            })
            .map(|index| (index, ThinkingCause::Tampered)),
    );
    candidates.into_iter().min_by_key(|(index, _)| *index)
}

/// The first change in `system`, `tools` or the messages the turn before sent, as the place
/// in `current` it comes before: (message, content block), with system and tools before
/// every message.
fn first_edit(previous: &Value, current: &Value) -> Option<((usize, usize), ThinkingCause)> {
    const BEFORE_MESSAGES: (usize, usize) = (0, 0);
    if stripped(previous.get("system")) != stripped(current.get("system")) {
        return Some((BEFORE_MESSAGES, ThinkingCause::System));
    }
    if let Some(name) = changed_tool(previous, current) {
        return Some((BEFORE_MESSAGES, ThinkingCause::Tool { name }));
    }
    let (before, after) = (messages(previous), messages(current));
    for (index, earlier) in before.iter().enumerate() {
        let place = PartPath::root().key("messages").index(index);
        let Some(message) = after.get(index) else {
            return Some(((index, 0), ThinkingCause::Message { place }));
        };
        if earlier.get("role") != message.get("role") {
            return Some(((index, 0), ThinkingCause::Message { place }));
        }
        let (earlier_content, content) = (content(earlier), content(message));
        let kept = |blocks: &[Value]| -> Vec<(usize, Value)> {
            blocks
                .iter()
                .enumerate()
                .filter(|(_, block)| !is_thinking_block(block))
                .map(|(position, block)| (position, without_cache_control(block)))
                .collect()
        };
        let (earlier_kept, kept_now) = (kept(&earlier_content), kept(&content));
        let differing = (0..earlier_kept.len().max(kept_now.len())).find(|&position| {
            earlier_kept.get(position).map(|(_, block)| block)
                != kept_now.get(position).map(|(_, block)| block)
        });
        if let Some(position) = differing {
            // Placed at the content block that differs: thinking blocks before it keep their
            // prefix.
            let at = kept_now.get(position).map_or(content.len(), |(at, _)| *at);
            let place = place.key("content").index(at);
            return Some(((index, at), ThinkingCause::Message { place }));
        }
    }
    None
}

/// The first tool added (without `defer_loading`), removed, renamed or edited.
fn changed_tool(previous: &Value, current: &Value) -> Option<String> {
    let tools = |body: &Value| -> Vec<Value> {
        body.get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    // "Add a tool with `defer_loading: true`" is not an edit.
                    .filter(|tool| tool.get("defer_loading") != Some(&Value::Bool(true)))
                    .map(without_cache_control)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (tools(previous), tools(current));
    let name = |tool: &Value| {
        tool.get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)")
            .to_owned()
    };
    for position in 0..before.len().max(after.len()) {
        match (before.get(position), after.get(position)) {
            (Some(earlier), Some(now)) if earlier != now => return Some(name(now)),
            (Some(tool), None) | (None, Some(tool)) => return Some(name(tool)),
            _ => {}
        }
    }
    None
}

/// The first block sent out of the order the blocks were produced in: the blocks the turn
/// before sent back, then the new ones. Blocks may be left out at the start or the end of
/// that order (all of them included), not between others, and not at the end when newer ones
/// follow; a block left out is not put back.
fn out_of_order(
    blocks: &[Block<'_>],
    earlier_blocks: &[Block<'_>],
    sent_before: usize,
) -> Option<(usize, ThinkingCause)> {
    let produced: Vec<&str> = earlier_blocks
        .iter()
        .filter_map(|block| block.key)
        .collect();
    let resent: Vec<(usize, &str)> = blocks
        .iter()
        .enumerate()
        .filter(|(_, block)| block.message < sent_before)
        .filter_map(|(index, block)| Some((index, block.key?)))
        .collect();
    let position_in = |key: &str| produced.iter().position(|earlier| *earlier == key);
    let mut expected = None;
    for &(index, key) in &resent {
        let Some(found) = position_in(key) else {
            return Some((index, ThinkingCause::BlockPutBack));
        };
        match expected {
            Some(next) if found > next => return Some((index, ThinkingCause::BlockLeftOut)),
            Some(next) if found < next => return Some((index, ThinkingCause::BlockMoved)),
            _ => {}
        }
        expected = Some(found + 1);
    }
    // Blocks left out at the end of the old ones, with newer blocks after them.
    let first_new = blocks
        .iter()
        .position(|block| block.message >= sent_before)?;
    let resent_to = expected.unwrap_or(0);
    (!resent.is_empty() && resent_to < produced.len())
        .then_some((first_new, ThinkingCause::BlockLeftOut))
}

/// What OpenAI's Responses API does with the reasoning items `current` sends back, with
/// `previous` the turn before: from GPT-6.2 on it drops them after a prefix edit (the first
/// change in `tools`, `text.format` or the input items the turn before sent), on a downgrade
/// to an earlier model version, and when the end user changes; the request succeeds.
pub fn replayed_reasoning(
    previous: &Request,
    current: &Request,
    current_rendered: &Rendered,
    turn: usize,
) -> Option<ThinkingIssue> {
    use kvlint_protocol::openai::{drops_reasoning_after_prefix_edits, gpt_version};
    if previous.format != BodyFormat::OpenAiResponses
        || current.format != BodyFormat::OpenAiResponses
    {
        return None;
    }
    let model = current.body.get("model")?.as_str()?;
    if !drops_reasoning_after_prefix_edits(model) {
        return None;
    }
    let items = |body: &Value| -> Vec<Value> {
        body.get("input")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, now) = (items(&previous.body), items(&current.body));
    let reasoning: Vec<usize> = now
        .iter()
        .enumerate()
        .filter(|(_, item)| item.get("type").and_then(Value::as_str) == Some("reasoning"))
        .map(|(index, _)| index)
        .collect();
    let first_reasoning = *reasoning.first()?;
    let previous_model = previous.body.get("model").and_then(Value::as_str);
    let end_user = |body: &Value| ["user", "safety_identifier"].map(|key| body.get(key).cloned());
    let head = |body: &Value| {
        (
            body.get("tools").map(without_cache_control),
            body.pointer("/text/format").cloned(),
        )
    };
    let (from, cause) =
        if let Some(from) = previous_model.filter(|from| gpt_version(model) < gpt_version(from)) {
            (
                first_reasoning,
                ThinkingCause::Downgrade {
                    from: from.to_owned(),
                },
            )
        } else if end_user(&previous.body) != end_user(&current.body) {
            (first_reasoning, ThinkingCause::EndUserChanged)
        } else if head(&previous.body) != head(&current.body) {
            let place = if previous.body.get("tools") != current.body.get("tools") {
                PartPath::root().key("tools")
            } else {
                PartPath::root().key("text").key("format")
            };
            (first_reasoning, ThinkingCause::Message { place })
        } else {
            let edited = before
                .iter()
                .zip(&now)
                .position(|(earlier, item)| {
                    without_cache_control(earlier) != without_cache_control(item)
                })
                .or_else(|| (now.len() < before.len()).then_some(now.len()))?;
            let place = PartPath::root().key("input").index(edited);
            let from = reasoning.iter().copied().find(|index| *index > edited)?;
            (from, ThinkingCause::Message { place })
        };
    let dropped: Vec<PartPath> = reasoning
        .iter()
        .filter(|index| **index >= from)
        .map(|index| PartPath::root().key("input").index(*index))
        .collect();
    Some(ThinkingIssue {
        turn,
        item: "reasoning item",
        block: dropped.first()?.clone(),
        cause,
        outcome: ThinkingOutcome::Dropped,
        model: model.to_owned(),
        failing_blocks: dropped.len(),
        failing_tokens: dropped
            .iter()
            .map(|path| tokens_of(current, current_rendered, path))
            .sum(),
    })
}

/// The thinking blocks of a Messages body, in order.
fn thinking_blocks(body: &Value) -> Vec<Block<'_>> {
    messages(body)
        .iter()
        .enumerate()
        .flat_map(|(message, value)| {
            value
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, block)| is_thinking_block(block))
                .map(move |(content, block)| Block {
                    message,
                    content,
                    key: block
                        .get("signature")
                        .or_else(|| block.get("data"))
                        .and_then(Value::as_str),
                    value: block,
                })
        })
        .collect()
}

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A message's content as blocks (a string is one text block).
fn content(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

/// `system` as compared: a string is one text block, without `cache_control`.
fn stripped(system: Option<&Value>) -> Option<Value> {
    match system? {
        Value::String(text) => Some(serde_json::json!([{"type": "text", "text": text}])),
        other => Some(without_cache_control(other)),
    }
}

/// A value without its `cache_control` markers, at any depth.
fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .filter(|(key, _)| key.as_str() != "cache_control")
                .map(|(key, value)| (key.clone(), without_cache_control(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

fn block_path(block: &Block<'_>) -> PartPath {
    PartPath::root()
        .key("messages")
        .index(block.message)
        .key("content")
        .index(block.content)
}

/// Tokens rendered from the parts of `request` under `path`.
pub(crate) fn tokens_of(request: &Request, rendered: &Rendered, path: &PartPath) -> usize {
    rendered
        .segments
        .iter()
        .filter(|segment| {
            request
                .parts
                .get(segment.part)
                .is_some_and(|part| part.path.segments().starts_with(path.segments()))
        })
        .map(|segment| {
            rendered.tokens.count_before(segment.range.end)
                - rendered.tokens.count_before(segment.range.start)
        })
        .sum()
}
