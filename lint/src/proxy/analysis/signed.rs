//! The signed history a request sends back, checked against what the API returned: every
//! thinking block (Anthropic Messages) and reasoning item (OpenAI Responses) of the previous
//! response, sent back value-equal, its signature intact, in its order. A gateway or library
//! between the application and the API that re-serializes, trims, re-signs or reorders them
//! gets the request refused or its reasoning dropped; the documentation tells users behind one
//! to "compare what it sends with what you sent". With a proxy on each side of a gateway, the
//! one whose check fails is the one after the hop that changed them.
//!
//! Checked where it decides the outcome: models that run Anthropic's prefix check, and OpenAI
//! models that drop reasoning items (GPT-6.2 and later), without `previous_response_id`
//! (the conversation kept on the server, nothing sent back).

use kvlint_protocol::BodyFormat;
use kvlint_protocol::openai::drops_reasoning_after_prefix_edits;
use kvlint_protocol::thinking::{ThinkingModel, is_thinking_block};
use kvlint_render::render::Renderer;
use kvlint_request::request::Request;
use kvlint_rules::thinking::{Account, ThinkingOutcome, replayed_reasoning, replayed_thinking};
use kvlint_sdk::Placed;
use serde_json::Value;

use super::Analysis;
use crate::proxy::Exchange;

/// What happened to a returned item on its way back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Sent back with another value (its text, its signature, a field).
    Altered,
    /// Not sent back.
    Dropped,
    /// Sent back in another order.
    Moved,
}

impl Change {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Altered => "altered",
            Self::Dropped => "dropped",
            Self::Moved => "moved",
        }
    }
}

/// What a response answered, as the next request sends it back: Anthropic's content blocks,
/// OpenAI Responses' output items (empty for other responses).
pub(super) fn answer(response: &Value) -> Vec<Value> {
    ["content", "output"]
        .iter()
        .find_map(|key| response.get(*key).and_then(Value::as_array))
        .cloned()
        .unwrap_or_default()
}

/// The signed items of an answer: Anthropic's `thinking` and `redacted_thinking` content
/// blocks, OpenAI's `reasoning` output items.
fn signed_items(answer: &[Value]) -> Vec<&Value> {
    answer
        .iter()
        .filter(|item| is_thinking_block(item) || is_reasoning(item))
        .collect()
}

fn is_reasoning(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("reasoning")
}

/// The first signed item of `answer` (the previous response's) that `body` does not send back
/// as it was returned, with the place in `body` and what happened; `previous` is the request
/// that response answered. `None` when every one comes back intact, or the model is not one
/// where it matters.
pub(super) fn first_change(
    previous: &Value,
    body: &Value,
    answer: &[Value],
) -> Option<(String, Change)> {
    let returned = signed_items(answer);
    if returned.is_empty() {
        return None;
    }
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let object = body.as_object()?;
    let (list, sent_before, signed): (&str, usize, fn(&Value) -> bool) =
        match BodyFormat::detect(object)? {
            BodyFormat::AnthropicMessages if ThinkingModel::of(model).is_some() => (
                "messages",
                items(previous, "messages").len(),
                is_thinking_block,
            ),
            BodyFormat::OpenAiResponses
                if drops_reasoning_after_prefix_edits(model)
                    && body.get("previous_response_id").is_none() =>
            {
                ("input", items(previous, "input").len(), is_reasoning)
            }
            _ => return None,
        };
    // What was sent back after the previous request's items: the answer's blocks (inside the
    // first new message) or its items (in the input, in order).
    let resent: Vec<(String, &Value)> = items(body, list)
        .iter()
        .enumerate()
        .skip(sent_before)
        .flat_map(|(index, item)| {
            let place = format!("{list}[{index}]");
            match item.get("content").and_then(Value::as_array) {
                Some(blocks) if list == "messages" => blocks
                    .iter()
                    .enumerate()
                    .map(|(block, value)| (format!("{place}.content[{block}]"), value))
                    .collect::<Vec<_>>(),
                _ => vec![(place, item)],
            }
        })
        .filter(|(_, value)| signed(value))
        .collect();
    let key = |item: &Value| {
        ["signature", "data", "id", "encrypted_content"]
            .iter()
            .find_map(|key| item.get(*key).and_then(Value::as_str).map(str::to_owned))
    };
    let returned_key = |value: &Value| returned.iter().any(|item| key(item) == key(value));
    let mut last_found = None;
    for (order, &item) in returned.iter().enumerate() {
        let found = resent
            .iter()
            .position(|(_, value)| key(value).is_some() && key(value) == key(item));
        let Some(found) = found else {
            // In its place, a block of its type the response did not return: re-signed.
            if let Some((place, value)) = resent.get(order)
                && value.get("type") == item.get("type")
                && !returned_key(value)
            {
                return Some((place.clone(), Change::Altered));
            }
            let place = resent.first().map_or_else(
                || format!("{list}[{sent_before}]"),
                |(place, _)| place.clone(),
            );
            return Some((place, Change::Dropped));
        };
        let (place, value) = &resent[found];
        if **value != *item {
            return Some((place.clone(), Change::Altered));
        }
        if last_found.is_some_and(|last| found < last) {
            return Some((place.clone(), Change::Moved));
        }
        last_found = Some(found);
    }
    // A signed item the response did not return, among the ones it did: one re-signed.
    resent
        .iter()
        .find(|(_, value)| !returned_key(value))
        .map(|(place, _)| (place.clone(), Change::Altered))
}

fn items<'a>(body: &'a Value, list: &str) -> &'a [Value] {
    body.get(list)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// What the API reported it did with the signed history of a request: refused it for a
/// thinking block bound to another conversation or tampered (a 400 naming the block's
/// signature), or dropped items (`input_transformations`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Reported {
    pub(super) refused: bool,
    pub(super) dropped: bool,
}

impl Reported {
    pub(super) fn of(status: u16, response_text: &str, response: Option<&Value>) -> Self {
        let refused =
            status == 400 && response_text.contains("Invalid `signature` in `thinking` block");
        let dropped = response
            .and_then(|response| response.get("input_transformations"))
            .and_then(Value::as_array)
            .is_some_and(|transformations| {
                transformations.iter().any(|entry| {
                    let kind = entry.get("type").and_then(Value::as_str);
                    let action = entry.get("action").and_then(Value::as_str);
                    kind == Some("thinking_dropped")
                        || (kind == Some("reasoning") && action == Some("removed"))
                })
            });
        Self { refused, dropped }
    }
}

impl Analysis {
    /// Before the session's guard takes `body`: whether it sends back the previous response's
    /// signed history as it was returned, and what kvlint predicts and the API reported it did
    /// with it, counted (and a change said on stderr).
    pub(super) fn check_signed_history(
        &self,
        placed: &Placed,
        exchange: &Exchange,
        body: &Value,
        (response, response_text): (Option<&Value>, &str),
    ) {
        let index = placed.joined.session;
        let Some(session) = self.sessions.guard(&placed.key) else {
            return;
        };
        let Some(previous) = session.guard.last_accepted() else {
            return;
        };
        let upstream = &exchange.upstream;
        let turn = session.guard.counters().turns;
        if let Some((place, change)) = first_change(&previous.request.body, body, &session.answer) {
            self.metrics.signed_change(upstream, change.as_str());
            eprintln!(
                "kvlint proxy: session {} turn {turn}: `{place}`: the previous response's signed history comes back {} (not as the API returned it)",
                index + 1,
                change.as_str()
            );
        }
        let predicted = predicted(previous.request, &session.answer, body, turn);
        let reported = Reported::of(exchange.status, response_text, response);
        for (source, said) in [("predicted", predicted), ("reported", reported)] {
            if said.refused {
                self.metrics.signed_outcome(upstream, "refused", source);
            }
            if said.dropped {
                self.metrics.signed_outcome(upstream, "dropped", source);
            }
        }
    }
}

/// What kvlint predicts the API does with a request's signed history: the prefix check of
/// its thinking blocks or reasoning items, as `kvlint check` runs it, against the session's
/// previous request followed by the `answer` it got (so that a block of that answer sent back
/// altered is seen as the API sees it). An account's date is not known: a new one assumed.
pub(super) fn predicted(
    previous: &Request,
    answer: &[Value],
    body: &Value,
    turn: usize,
) -> Reported {
    if !sends_signed(body) {
        return Reported::default();
    }
    let mut answered = previous.body.clone();
    match previous.format {
        BodyFormat::AnthropicMessages => {
            if let Some(messages) = answered.get_mut("messages").and_then(Value::as_array_mut) {
                messages.push(serde_json::json!({"role": "assistant", "content": answer}));
            }
        }
        BodyFormat::OpenAiResponses => {
            if let Some(input) = answered.get_mut("input").and_then(Value::as_array_mut) {
                input.extend(answer.iter().cloned());
            }
        }
        _ => {}
    }
    let (Ok(previous), Ok(current)) = (Request::from_body(&answered), Request::from_body(body))
    else {
        return Reported::default();
    };
    let Ok(rendered) = Renderer::provider().render(&current) else {
        return Reported::default();
    };
    let issue = replayed_thinking(&previous, &current, &rendered, turn, Account::Unknown)
        .or_else(|| replayed_reasoning(&previous, &current, &rendered, turn));
    match issue.map(|issue| issue.outcome) {
        Some(ThinkingOutcome::Refused(_)) => Reported {
            refused: true,
            dropped: false,
        },
        Some(ThinkingOutcome::Dropped) => Reported {
            refused: false,
            dropped: true,
        },
        _ => Reported::default(),
    }
}

/// Whether a body sends back a thinking block or a reasoning item.
fn sends_signed(body: &Value) -> bool {
    let blocks = items(body, "messages")
        .iter()
        .filter_map(|message| message.get("content").and_then(Value::as_array))
        .flatten();
    blocks
        .chain(items(body, "input"))
        .any(|item| is_thinking_block(item) || is_reasoning(item))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn turn(messages: Vec<Value>) -> Value {
        json!({"model": "claude-opus-5-5", "max_tokens": 64, "messages": messages})
    }

    /// What a gateway does to signed history, told apart: re-signed or emptied (altered),
    /// left out (dropped), reordered (moved); the intact answer passes.
    #[test]
    fn each_returned_block_must_come_back_as_it_was() {
        let first = json!({"role": "user", "content": "Fix the test."});
        let answer = vec![
            json!({"type": "thinking", "thinking": "Read it first.", "signature": "EqA"}),
            json!({"type": "redacted_thinking", "data": "EqB"}),
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ];
        let previous = turn(vec![first.clone()]);
        let returned = super::answer(&json!({"content": answer}));
        assert_eq!(signed_items(&returned).len(), 2);
        let sent = |blocks: Vec<Value>| {
            turn(vec![
                first.clone(),
                json!({"role": "assistant", "content": blocks}),
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}),
            ])
        };
        assert_eq!(
            first_change(&previous, &sent(answer.clone()), &returned),
            None
        );
        let mut emptied = answer.clone();
        emptied[0]["thinking"] = json!("");
        assert_eq!(
            first_change(&previous, &sent(emptied), &returned),
            Some(("messages[1].content[0]".to_owned(), Change::Altered))
        );
        let mut resigned = answer.clone();
        resigned[0]["signature"] = json!("EqGateway");
        assert_eq!(
            first_change(&previous, &sent(resigned), &returned),
            Some(("messages[1].content[0]".to_owned(), Change::Altered))
        );
        let left_out = vec![answer[1].clone(), answer[2].clone()];
        assert_eq!(
            first_change(&previous, &sent(left_out), &returned),
            Some(("messages[1].content[0]".to_owned(), Change::Dropped))
        );
        let swapped = vec![answer[1].clone(), answer[0].clone(), answer[2].clone()];
        assert_eq!(
            first_change(&previous, &sent(swapped), &returned),
            Some(("messages[1].content[0]".to_owned(), Change::Moved))
        );
        // A model without the check: not this check's business.
        let mut older = sent(vec![answer[2].clone()]);
        older["model"] = json!("claude-sonnet-4-5");
        assert_eq!(first_change(&previous, &older, &returned), None);
    }

    #[test]
    fn the_api_s_refusals_and_drops_are_read_from_its_answer() {
        let refusal = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation."}}"#;
        assert_eq!(
            Reported::of(400, refusal, None),
            Reported {
                refused: true,
                dropped: false
            }
        );
        let dropped = json!({"content": [], "input_transformations": [
            {"type": "thinking_dropped", "path": "messages.3.content.0", "reason": "prefix_binding_mismatch"}]});
        assert_eq!(
            Reported::of(200, "", Some(&dropped)),
            Reported {
                refused: false,
                dropped: true
            }
        );
        assert_eq!(
            Reported::of(200, "{}", Some(&json!({}))),
            Reported::default()
        );
    }
}
