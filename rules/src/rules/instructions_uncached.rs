use kvlint_core::diff::RenderedRequest;
use kvlint_protocol::BodyFormat;
use kvlint_protocol::openai::instructions_after_input;
use kvlint_request::diagnostic::Severity;
use kvlint_request::path::PartPath;
use kvlint_request::request::Request;
use serde_json::Value;

use crate::thinking::tokens_of;
use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds a Responses request to GPT-6.2 or a later model that sends its system prompt in
    /// the top-level `instructions`. From GPT-6.2 on the API appends `instructions` after
    /// `input`, where the prompt cache never reaches: their tokens are billed at the uncached
    /// rate on every turn. Reported once per session, at the first turn that does it, with
    /// the tokens each turn pays.
    ///
    /// ## Why is this bad?
    /// Agents have always put their long, stable system prompt in `instructions`, which earlier
    /// models cached at the head of the prompt. On GPT-6.2 the same request leaves the whole
    /// system prompt out of the cache: OpenCode measured about 14,000 uncached tokens per step
    /// until it moved them (v2.3.2). Earlier models also changed the prefix when
    /// `instructions` changed; GPT-6.2 does not, which is what `instructions` is now for: a
    /// turn's own directions.
    ///
    /// ## Example
    /// ```python
    /// client.responses.create(model="gpt-6.2-sol", instructions=LONG_SYSTEM_PROMPT,
    ///                         input=history)
    /// ```
    ///
    /// ## Use instead
    /// Send the stable instructions as a developer message at the start of `input`, and keep
    /// `instructions` for what applies to this turn only:
    /// ```python
    /// client.responses.create(model="gpt-6.2-sol",
    ///     input=[{"role": "developer", "content": LONG_SYSTEM_PROMPT}, *history])
    /// ```
    pub struct InstructionsUncached {
        name: "instructions-uncached",
        code: "KV506",
        summary: "GPT-6.2 appends `instructions` after the input: a system prompt sent there is never cached",
    }
}

impl InstructionsUncached {
    /// The tokens of `current`'s `instructions` when the model appends them after the input
    /// and `previous` (the turn before) did not already send them so: the first turn of the
    /// session that pays for them.
    pub fn uncached_tokens(previous: Option<&Request>, current: RenderedRequest<'_>) -> Option<usize> {
        let appended = |request: &Request| {
            request.format == BodyFormat::OpenAiResponses
                && request
                    .body
                    .get("instructions")
                    .and_then(Value::as_str)
                    .is_some_and(|text| !text.is_empty())
                && request
                    .body
                    .get("model")
                    .and_then(Value::as_str)
                    .is_some_and(instructions_after_input)
        };
        if !appended(current.request) || previous.is_some_and(appended) {
            return None;
        }
        let path = PartPath::root().key("instructions");
        let tokens = tokens_of(current.request, current.rendered, &path);
        Some(tokens)
    }
}

impl Rule for InstructionsUncached {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::UncachedInstructions { model, tokens, .. } = *input else {
            return None;
        };
        Some(
            Finding::new(
                Severity::Warning,
                format!(
                    "{model} appends `instructions` after `input`: their {tokens} tokens are never cached and are billed at the uncached rate on every turn"
                ),
                "send the stable instructions as a developer message at the start of `input`; keep `instructions` for directions that apply to one turn",
            )
            .with_tokens_lost(tokens),
        )
    }
}
