
use kvlint_request::diagnostic::Severity;
use kvlint_render::template_check::TemplateBreakKind;

use crate::{Finding, Rule, RuleInput, RuleMeta, declare_rule};

declare_rule! {
    /// ## What it does
    /// Finds chat templates (with `kvlint template`) whose generation prompt, the text that
    /// opens the assistant's answer, is rendered differently once that answer is part of
    /// the history: an opened `<think>` the history does not repeat, an empty
    /// `<think>\n\n</think>` only in the generation turn.
    ///
    /// ## Why is this bad?
    /// Self-hosted engines (vLLM, SGLang, llama.cpp) keep the tokens of the prompt and of the
    /// answer they generated. The next turn hits that cache only as far as it renders the
    /// previous prompt and answer token for token; a generation prompt that history does not
    /// reproduce stops the hit at the end of the previous prompt, and every answer is
    /// prefilled again.
    ///
    /// ## Example
    /// ```jinja
    /// {%- if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n' }}{%- endif %}
    /// ```
    ///
    /// ## Use instead
    /// Render history the way the model generated it (keep the `<think>` opening, or pass
    /// the template option that keeps reasoning), or accept that each answer is prefilled
    /// once more on the next turn.
    pub struct GenerationPrompt {
        name: "generation-prompt",
        code: "KV302",
        summary: "the generation prompt is not rendered the same way in history",
    }
}

impl Rule for GenerationPrompt {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    /// Found by the template check, not in a pair of recorded turns.
    fn check(&self, input: &RuleInput<'_>) -> Option<Finding> {
        let RuleInput::TemplateBreak(found) = *input else {
            return None;
        };
        (found.kind == TemplateBreakKind::GenerationPromptNotReproduced).then(|| {
            Finding::new(
                Severity::Warning,
                "the generation prompt is not rendered the same way once the answer is history: the engine's cached answer is not reused",
                "render history the way the model generated it, or accept one more prefill of each answer",
            )
        })
    }
}
