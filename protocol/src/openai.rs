//! What OpenAI's Responses API does differently by model, as documented (read 2026-12-07):
//!
//! - "Starting with GPT-6.2, the Responses API drops reasoning items after mid-conversation
//!   edits to the conversation history (prefix edits), certain model changes (including
//!   downgrades), or changes to the end user or organization."
//!   (<https://developers.openai.com/api/docs/guides/latest-model/gpt-6.2-astra.md>)
//! - From GPT-6.2 on, the top-level `instructions` are appended after `input`: to make
//!   reusable instructions cacheable, put them in a developer message at the start of `input`
//!   (the "latest model" guide, ja-JP, es-419 and ko-KR pages; the English sentence is cut in
//!   the stored copy). The keep-prefix guide adds that they are billed at the uncached input
//!   rate (<https://developers.openai.com/api/docs/guides/keep-prefix-unchanged>, through
//!   a translation of 2026-11-19; OpenCode v2.3.2 measured the same).

/// A GPT model's version, from its name: `gpt-6.2-sol` is 6.2, `gpt-5` is 5.0, `gpt-4o`
/// is 4.0; `None` for a name that is not `gpt-N…`.
pub fn gpt_version(model: &str) -> Option<(u32, u32)> {
    let rest = model.strip_prefix("gpt-")?;
    let digits = |text: &str| -> Option<(u32, usize)> {
        let end = text
            .find(|character: char| !character.is_ascii_digit())
            .unwrap_or(text.len());
        Some((text[..end].parse().ok()?, end))
    };
    let (major, end) = digits(rest)?;
    let minor = rest[end..]
        .strip_prefix('.')
        .and_then(digits)
        .map_or(0, |(minor, _)| minor);
    Some((major, minor))
}

/// The first version with GPT-6.2's rules.
const GPT_6_2: (u32, u32) = (6, 2);

/// Whether the model appends the top-level `instructions` after `input`, where the prompt
/// cache never reaches them.
pub fn instructions_after_input(model: &str) -> bool {
    gpt_version(model).is_some_and(|version| version >= GPT_6_2)
}

/// Whether the model drops the reasoning items a request sends back after a prefix edit, a
/// downgrade, or a change of end user or organization.
pub fn drops_reasoning_after_prefix_edits(model: &str) -> bool {
    instructions_after_input(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_model_name() {
        assert_eq!(gpt_version("gpt-6.2-sol"), Some((6, 2)));
        assert_eq!(gpt_version("gpt-6.10-astra"), Some((6, 10)));
        assert_eq!(gpt_version("gpt-5"), Some((5, 0)));
        assert_eq!(gpt_version("gpt-4o-mini"), Some((4, 0)));
        assert_eq!(gpt_version("o3"), None);
        assert!(instructions_after_input("gpt-6.2-astra"));
        assert!(instructions_after_input("gpt-7"));
        assert!(!instructions_after_input("gpt-6.1-sol"));
        assert!(!instructions_after_input("claude-opus-5-5"));
    }
}
