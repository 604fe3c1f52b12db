//! The cache usage the API reported for the responses an application shows its guard
//! ([`crate::Guard::observe_response`]), summed, and the same under OpenTelemetry's GenAI
//! attribute names, for the application's metrics or spans.

use serde::Serialize;
use serde_json::Value;

/// OpenTelemetry's GenAI attributes for prompt tokens (open-telemetry/semantic-conventions,
/// `model/gen-ai/registry.yaml`, v1.40.0, read 2026-12-07): all input tokens ("SHOULD include
/// all types of input tokens, including cached tokens"), those "served from a provider-managed
/// cache", and those "written to a provider-managed cache".
pub const OTEL_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const OTEL_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
pub const OTEL_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";

/// Prompt-token usage the API reported, summed over the responses shown to a guard: every
/// format `kvlint check`'s reported-usage audit reads (OpenAI's `cached_tokens` and
/// `cache_write_tokens`, Anthropic's and Bedrock's reads and writes, Gemini's, DeepSeek's,
/// llama.cpp's timings). Input tokens count the cached ones too, whatever the API's own
/// convention (Anthropic counts them apart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReportedUsage {
    /// Responses whose usage said something of the cache.
    pub responses: usize,
    pub input_tokens: usize,
    pub cache_read_input_tokens: usize,
    pub cache_creation_input_tokens: usize,
}

impl ReportedUsage {
    /// Adds what `response` reports; `false` when it says nothing of the cache (a stream's
    /// chunk without usage, an error).
    pub(crate) fn add(&mut self, response: &Value) -> bool {
        let Some(usage) = kvlint_core::cache::reported_usage(response) else {
            return false;
        };
        self.responses += 1;
        self.input_tokens += usage.prompt_tokens.unwrap_or(usage.cached_tokens);
        self.cache_read_input_tokens += usage.cached_tokens;
        self.cache_creation_input_tokens += usage.cache_write_tokens.unwrap_or(0);
        true
    }

    /// The totals under OpenTelemetry's GenAI attribute names, to set on a span or export
    /// as counters.
    ///
    /// ```
    /// use kvlint_sdk::{Guard, GuardMode, Renderer};
    /// use serde_json::json;
    ///
    /// let mut guard = Guard::new(Renderer::provider(), GuardMode::Warn);
    /// guard.observe_response(&json!({"usage": {"input_tokens": 12,
    ///     "cache_read_input_tokens": 4096, "cache_creation_input_tokens": 30}}));
    /// assert_eq!(
    ///     guard.reported_usage().otel_attributes(),
    ///     [
    ///         ("gen_ai.usage.input_tokens", 4138),
    ///         ("gen_ai.usage.cache_read.input_tokens", 4096),
    ///         ("gen_ai.usage.cache_creation.input_tokens", 30),
    ///     ]
    /// );
    /// ```
    pub fn otel_attributes(&self) -> [(&'static str, usize); 3] {
        [
            (OTEL_INPUT_TOKENS, self.input_tokens),
            (OTEL_CACHE_READ_INPUT_TOKENS, self.cache_read_input_tokens),
            (
                OTEL_CACHE_CREATION_INPUT_TOKENS,
                self.cache_creation_input_tokens,
            ),
        ]
    }
}
