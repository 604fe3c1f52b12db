//! What a recorded response says the provider or engine served from cache, and where that
//! disagrees with the prediction: the questions users of recorded sessions ask (a prefix sent
//! again in full but nothing read; cache writes nobody reads; reads larger than the prompt).

use serde_json::Value;

use super::TurnCachePrediction;

/// The usage a response reports, in the fields of its API: OpenAI chat
/// (`usage.prompt_tokens`, `prompt_tokens_details.cached_tokens`), Responses (`input_tokens`,
/// `input_tokens_details.cached_tokens`), Anthropic (`input_tokens` beside
/// `cache_read_input_tokens` and `cache_creation_input_tokens`), Gemini
/// (`usageMetadata.promptTokenCount`, `cachedContentTokenCount`), Bedrock (`inputTokens`,
/// `cacheReadInputTokens`, `cacheWriteInputTokens`), DeepSeek (`prompt_cache_hit_tokens`),
/// llama.cpp (`timings.cache_n`, `prompt_n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportedUsage {
    /// The whole prompt, cached or not, when the response says.
    pub prompt_tokens: Option<usize>,
    pub cached_tokens: usize,
    /// Tokens written to the cache (Anthropic, Bedrock).
    pub cache_write_tokens: Option<usize>,
}

/// The usage `response` reports; `None` when it says nothing of the cache.
/// The JSON pointer of the field `name` beside the one `pointer` names.
fn sibling_pointer(pointer: &str, name: &str) -> String {
    match pointer.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/{name}"),
        None => format!("/{name}"),
    }
}

pub fn reported_usage(response: &Value) -> Option<ReportedUsage> {
    let count = |pointer: &str| {
        response
            .pointer(pointer)
            .and_then(Value::as_u64)
            .map(|count| count as usize)
    };
    // Anthropic and Bedrock count the uncached input apart from what was read and written.
    for (input, read, write) in [
        (
            "/usage/input_tokens",
            "/usage/cache_read_input_tokens",
            "/usage/cache_creation_input_tokens",
        ),
        (
            "/usage/inputTokens",
            "/usage/cacheReadInputTokens",
            "/usage/cacheWriteInputTokens",
        ),
    ] {
        if let Some(cached) = count(read) {
            let written = count(write);
            return Some(ReportedUsage {
                prompt_tokens: count(input).map(|input| input + cached + written.unwrap_or(0)),
                cached_tokens: cached,
                cache_write_tokens: written,
            });
        }
    }
    let plain = |prompt: &str, cached_at: &str| {
        count(cached_at).map(|cached| ReportedUsage {
            prompt_tokens: count(prompt),
            cached_tokens: cached,
            // OpenAI from GPT-5.6 on: "Writes are reported in `cache_write_tokens`", beside
            // `cached_tokens` (the prompt caching guide, read 2026-12-07).
            cache_write_tokens: count(&sibling_pointer(cached_at, "cache_write_tokens")),
        })
    };
    plain(
        "/usage/prompt_tokens",
        "/usage/prompt_tokens_details/cached_tokens",
    )
    .or_else(|| {
        plain(
            "/usage/input_tokens",
            "/usage/input_tokens_details/cached_tokens",
        )
    })
    .or_else(|| plain("/usage/prompt_tokens", "/usage/prompt_cache_hit_tokens"))
    .or_else(|| {
        // Gemini leaves the cached count out when nothing was read; its SDKs spell the
        // fields in snake case.
        [
            (
                "/usageMetadata/promptTokenCount",
                "/usageMetadata/cachedContentTokenCount",
            ),
            (
                "/usage_metadata/prompt_token_count",
                "/usage_metadata/cached_content_token_count",
            ),
        ]
        .into_iter()
        .find_map(|(prompt, cached)| {
            count(prompt).map(|prompt| ReportedUsage {
                prompt_tokens: Some(prompt),
                cached_tokens: count(cached).unwrap_or(0),
                cache_write_tokens: None,
            })
        })
    })
    .or_else(|| {
        let cached = count("/timings/cache_n")?;
        Some(ReportedUsage {
            prompt_tokens: Some(cached + count("/timings/prompt_n").unwrap_or(0)),
            cached_tokens: cached,
            cache_write_tokens: None,
        })
    })
}

/// Where a turn's reported usage disagrees with what kvlint predicts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageIssue {
    pub turn: usize,
    pub kind: UsageIssueKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageIssueKind {
    /// kvlint predicts a hit (the prompt starts like an earlier one) and nothing was read: the
    /// prompt is under the model's minimum when `minimum` is set, else the entry expired or
    /// another replica served the turn.
    PredictedButUnread {
        predicted: usize,
        minimum: Option<usize>,
    },
    /// Tokens written to the cache that no later turn of the session reads.
    WrittenNeverRead { written: usize },
    /// More tokens read from the cache than the prompt has: the usage is not this request's.
    ReadExceedsPrompt { cached: usize, prompt: usize },
}

/// Compares each turn's reported usage with its prediction.
pub fn audit_reported(predictions: &[TurnCachePrediction]) -> Vec<UsageIssue> {
    let mut issues = Vec::new();
    for (turn, prediction) in predictions.iter().enumerate() {
        let Some(usage) = prediction.reported else {
            continue;
        };
        let prompt = usage.prompt_tokens.unwrap_or(prediction.prompt_tokens);
        if usage.cached_tokens > prompt {
            issues.push(UsageIssue {
                turn,
                kind: UsageIssueKind::ReadExceedsPrompt {
                    cached: usage.cached_tokens,
                    prompt,
                },
            });
        }
        if prediction.recorded.cached > 0 && usage.cached_tokens == 0 {
            let minimum = prediction
                .figures
                .map(|figures| figures.min_cacheable_tokens)
                .filter(|minimum| prompt < *minimum);
            issues.push(UsageIssue {
                turn,
                kind: UsageIssueKind::PredictedButUnread {
                    predicted: prediction.recorded.cached,
                    minimum,
                },
            });
        }
        // Only where later turns report usage: the last turn's write may be read after the
        // recording ends.
        let mut later = predictions[turn + 1..]
            .iter()
            .filter_map(|later| later.reported)
            .peekable();
        if let Some(written) = usage.cache_write_tokens.filter(|written| *written > 0)
            && later.peek().is_some()
            && later.all(|later| later.cached_tokens == 0)
        {
            issues.push(UsageIssue {
                turn,
                kind: UsageIssueKind::WrittenNeverRead { written },
            });
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_api_reports_its_usage_in_its_own_fields() {
        let cases = [
            (
                json!({"usage": {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}}}),
                (Some(2006), 1920, None),
            ),
            (
                json!({"usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2944}}}),
                (Some(3000), 2944, None),
            ),
            // GPT-5.6 and later report the tokens written beside the ones read.
            (
                json!({"usage": {"prompt_tokens": 5000, "prompt_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 2900}}}),
                (Some(5000), 2048, Some(2900)),
            ),
            (
                json!({"usage": {"input_tokens": 12, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 300}}),
                (Some(4312), 4000, Some(300)),
            ),
            (
                json!({"usage": {"inputTokens": 10, "cacheReadInputTokens": 0, "cacheWriteInputTokens": 1500}}),
                (Some(1510), 0, Some(1500)),
            ),
            (
                json!({"usageMetadata": {"promptTokenCount": 5000}}),
                (Some(5000), 0, None),
            ),
            (
                json!({"timings": {"cache_n": 178, "prompt_n": 6}}),
                (Some(184), 178, None),
            ),
        ];
        for (response, (prompt, cached, written)) in cases {
            let usage = reported_usage(&response).unwrap();
            assert_eq!(
                (
                    usage.prompt_tokens,
                    usage.cached_tokens,
                    usage.cache_write_tokens
                ),
                (prompt, cached, written),
                "{response}"
            );
        }
        // Usage that says nothing of the cache.
        assert!(reported_usage(&json!({"usage": {"prompt_tokens": 10}})).is_none());
    }
}
