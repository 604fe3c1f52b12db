//! What the engine says it served from cache: the response field each engine reports it in,
//! and llama.cpp's own counter in `/metrics`.

use serde_json::Value;

use crate::engine_client::Client;
use kvlint_protocol::EngineName;

use crate::engine_client::prometheus_value;

/// Sends a turn's chat request and reads what the engine served from cache; a failure goes
/// into the turn's note.
pub(super) fn observe(
    client: &Client,
    kind: EngineName,
    body: &Value,
    headers: &[(&str, &str)],
    note: &mut Option<String>,
) -> Option<usize> {
    let answer = client
        .post_with("/v1/chat/completions", body, headers)
        .map_err(|failure| failure.0)
        .and_then(|response| observed_cached(kind, &response));
    answer.map_err(|problem| *note = Some(problem)).ok()
}

impl Client {
    /// llama.cpp's `llamacpp:prompt_tokens_cached_total` (needs `--metrics` on the server).
    pub(super) fn cached_total(&self) -> Option<f64> {
        prometheus_value(
            &self.get_text("/metrics")?,
            "llamacpp:prompt_tokens_cached_total",
        )
    }
}

/// The cached prompt tokens an engine reports in a chat completion response.
pub fn observed_cached(kind: EngineName, response: &Value) -> Result<usize, String> {
    let details = response
        .pointer("/usage/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64);
    let timings = response.pointer("/timings/cache_n").and_then(Value::as_u64);
    let responses = response
        .pointer("/usage/input_tokens_details/cached_tokens")
        .and_then(Value::as_u64);
    let anthropic = response
        .pointer("/usage/cache_read_input_tokens")
        .and_then(Value::as_u64);
    let gemini = response
        .pointer("/usageMetadata/cachedContentTokenCount")
        .and_then(Value::as_u64);
    let deepseek = response
        .pointer("/usage/prompt_cache_hit_tokens")
        .and_then(Value::as_u64);
    let value = match kind {
        EngineName::LlamaCpp => timings.or(details),
        EngineName::Vllm | EngineName::Sglang => details,
        EngineName::OpenAi | EngineName::Xai => details.or(responses),
        EngineName::Anthropic => anthropic,
        EngineName::Gemini => gemini,
        EngineName::DeepSeek => deepseek,
    };
    value.map(|value| value as usize).ok_or_else(|| match kind {
        EngineName::OpenAi | EngineName::Xai => "the response has no `usage.prompt_tokens_details.cached_tokens`".to_owned(),
        EngineName::Anthropic => "the response has no `usage.cache_read_input_tokens`".to_owned(),
        EngineName::Gemini => "the response has no `usageMetadata.cachedContentTokenCount`".to_owned(),
        EngineName::DeepSeek => "the response has no `usage.prompt_cache_hit_tokens`".to_owned(),
        EngineName::LlamaCpp => "the response has neither `timings.cache_n` nor `usage.prompt_tokens_details.cached_tokens`".to_owned(),
        EngineName::Vllm => "`usage.prompt_tokens_details` is null: start vLLM with --enable-prompt-tokens-details".to_owned(),
        EngineName::Sglang => "`usage.prompt_tokens_details` is null: start SGLang with --enable-cache-report".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn observed_fields_of_hosted_apis() {
        // Response shapes as the APIs document them.
        let openai = json!({"usage": {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}}});
        assert_eq!(observed_cached(EngineName::OpenAi, &openai), Ok(1920));
        let responses = json!({"usage": {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1024}}});
        assert_eq!(observed_cached(EngineName::OpenAi, &responses), Ok(1024));
        let anthropic = json!({"usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4500}});
        assert_eq!(observed_cached(EngineName::Anthropic, &anthropic), Ok(4500));
    }

    #[test]
    fn observed_fields_per_engine() {
        // Recorded response shapes: llama.cpp with timings, vLLM without prompt details.
        let llamacpp =
            json!({"usage": {"prompt_tokens": 60}, "timings": {"cache_n": 47, "prompt_n": 13}});
        assert_eq!(observed_cached(EngineName::LlamaCpp, &llamacpp), Ok(47));
        let vllm = json!({"usage": {"prompt_tokens": 60, "prompt_tokens_details": null}});
        assert!(
            observed_cached(EngineName::Vllm, &vllm)
                .unwrap_err()
                .contains("--enable-prompt-tokens-details")
        );
    }
}
