use kvlint_request::request::{PartKind, Request};
use serde_json::Value;

use super::{diverges_in_tools, excerpt};
use crate::{Finding, Rule, RuleInput, RuleMeta, TurnPair, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds a system prompt that grows at its end by the text of a later system message:
    /// a gateway or an engine's request conversion that merges every system (or developer)
    /// message into the first one. The earlier turn sent the reminder as its own message
    /// after the conversation, or the system prompt grows by the newest reminder each turn
    /// while the conversation itself is sent again unchanged.
    ///
    /// ## Why is this bad?
    /// The first message heads the prompt. Moving a later system message into it changes
    /// the prompt before the whole conversation, so every turn that brings a new reminder
    /// recomputes the conversation, and the reused prefix only advances by the reminder.
    /// Agents such as Claude Code send reminders as mid-conversation system messages;
    /// gateways and engines that accept only one leading system message merge them into
    /// the first (MTPLX#477: `_consolidate_system_messages`; CLIProxyAPI's conversion of
    /// Claude requests to Chat Completions; LiteLLM's merge of system and developer
    /// messages for non-OpenAI providers).
    ///
    /// ## Example
    /// ```python
    /// system = [m for m in messages if m["role"] == "system"]
    /// rest = [m for m in messages if m["role"] != "system"]
    /// messages = [{"role": "system", "content": "\n\n".join(m["content"] for m in system)}] + rest
    /// ```
    ///
    /// ## Use instead
    /// Merge only the leading run of system messages. Keep a later system message where it
    /// was sent, or send it in place as a user message, so the conversation before it stays
    /// the prefix:
    /// ```python
    /// lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    /// head = {"role": "system", "content": "\n\n".join(m["content"] for m in messages[:lead])}
    /// rest = [m if m["role"] != "system" else {**m, "role": "user"} for m in messages[lead:]]
    /// messages = [head] + rest
    /// ```
    pub struct SystemMerged {
        name: "system-merged",
        code: "KV304",
        summary: "a later system message was merged into the first one",
    }
}

impl Rule for SystemMerged {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TurnPair(pair) = *input else {
            return None;
        };
        merged_system_message(pair)
    }
}

/// The opening instructions of a request as one text, and where its conversation starts:
/// the system parts (Anthropic's `system`, Responses' `instructions`) and a first system or
/// developer message.
fn head(request: &Request) -> (String, usize) {
    let opens_with_instructions = request
        .messages
        .first()
        .is_some_and(|message| message.role.is_instructions());
    let text = request
        .parts
        .iter()
        .filter(|part| !part.kind.is_structural())
        .filter(|part| match part.message {
            Some(index) => index == 0 && opens_with_instructions,
            None => part.kind == PartKind::System,
        })
        .map(|part| &*part.text)
        .collect();
    (text, usize::from(opens_with_instructions))
}

/// A message's text: its content parts back to back.
fn message_text(request: &Request, index: usize) -> String {
    request
        .parts
        .iter()
        .filter(|part| part.message == Some(index) && !part.kind.is_structural())
        .map(|part| &*part.text)
        .collect()
}

fn merged_system_message(pair: &TurnPair<'_>) -> Option<Finding> {
    let (previous, current) = (pair.previous, pair.current);
    let (previous_head, previous_start) = head(previous);
    let (current_head, current_start) = head(current);
    let added = current_head.strip_prefix(previous_head.as_str())?.trim();
    if added.is_empty() || previous_head.trim().is_empty() || diverges_in_tools(pair) {
        return None;
    }
    let diverges_in_head = pair.current_part().is_some_and(|part| match part.message {
        Some(index) => index == 0 && current_start == 1,
        None => part.kind == PartKind::System,
    });
    if !diverges_in_head {
        return None;
    }
    // The later system messages of the earlier turn whose text the system prompt now holds.
    let moved: Vec<usize> = (previous_start..previous.messages.len())
        .filter(|&index| previous.messages[index].role.is_instructions())
        .filter(|&index| {
            let text = message_text(previous, index);
            !text.trim().is_empty() && added.contains(text.trim())
        })
        .collect();
    let previous_conversation: Vec<&Value> = (previous_start..previous.messages.len())
        .filter(|index| !moved.contains(index))
        .filter_map(|index| previous.message_value(index))
        .collect();
    let current_conversation: Vec<&Value> = (current_start..current.messages.len())
        .filter_map(|index| current.message_value(index))
        .collect();
    // The conversation is sent again as it was (without the messages that moved), and moves
    // on: what the system prompt gained came with the turn, not with an edit of the prompt.
    let continues = current_conversation.get(..previous_conversation.len())
        == Some(previous_conversation.as_slice());
    if !continues || previous_conversation.is_empty() {
        return None;
    }
    let earlier_turn = pair.index.saturating_sub(1);
    let cause = match moved.first() {
        Some(&index) => format!(
            "a later system message merged into the first one: turn {earlier_turn}'s `{}` (`{}`) now ends the system prompt",
            previous.messages[index].path,
            excerpt(&message_text(previous, index))
        ),
        None if current_conversation.len() > previous_conversation.len() => format!(
            "later system messages merged into the first one: the system prompt grew at its end by `{}` and the conversation after it is sent again unchanged",
            excerpt(added)
        ),
        None => return None,
    };
    Some(Finding::of_pair(
        pair,
        &cause,
        "keep the first system message fixed: merge only the leading system messages and send a later one where it was (or as a user message)",
    ))
}

#[cfg(test)]
mod tests {
    use super::super::fixture_messages;

    #[test]
    fn the_finding_points_at_the_message_that_moved() {
        let messages = fixture_messages("system-merged/fail/trailing-reminder-hoisted.jsonl");
        assert_eq!(messages.len(), 2);
        assert!(
            messages[0].starts_with(concat!(
                "a later system message merged into the first one: turn 0's `messages[4]` ",
                "(`The task tools haven't been used…`) now ends the system prompt: "
            )),
            "{}",
            messages[0]
        );
        assert!(
            messages[1]
                .contains("turn 1's `messages[6]` (`The user sent a new message while you…`)"),
            "{}",
            messages[1]
        );
    }

    #[test]
    fn a_merge_seen_only_after_the_gateway_names_the_text_added() {
        let messages = fixture_messages("system-merged/fail/gateway-merges-reminders.jsonl");
        assert_eq!(messages.len(), 2);
        assert!(
            messages[0].starts_with(concat!(
                "later system messages merged into the first one: the system prompt grew at its end ",
                "by `The task tools haven't been used…`"
            )),
            "{}",
            messages[0]
        );
    }
}
