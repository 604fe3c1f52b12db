//! Which HTTP endpoints carry a prompt.
//!
//! Two questions, answered from one list each: is a request to this path a prompt kvlint
//! analyses (the proxy, an OpenAI Batch line, the Python clients' hooks), and is it a call a
//! recording holds that takes no prompt at all (passed over with the reason when grouping a
//! recording into sessions; any other JSON body in a known format is read as a prompt there,
//! whatever its path, since recorders keep gateways' and providers' own paths).

/// The path endpoints whose POST bodies are prompts kvlint reads: OpenAI Chat Completions and
/// Responses, Anthropic Messages (and the engines' OpenAI- and Anthropic-compatible servers).
pub const PROMPT_PATHS: [&str; 3] = ["/chat/completions", "/responses", "/messages"];

/// Parts of a path that mark an endpoint taking no prompt.
pub const NOT_PROMPT_PATHS: [&str; 9] = [
    "embeddings",
    "count_tokens",
    // Gemini's.
    ":countTokens",
    ":embedContent",
    ":batchEmbedContents",
    // Bedrock's `/model/<id>/count-tokens`.
    "count-tokens",
    "/compact",
    "/moderations",
    "/batches",
];

/// The path of a URL or path, without its query and fragment.
pub fn path_of(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or_default()
}

/// Whether a request to `url` (a path or a whole URL) carries a prompt kvlint reads: it ends
/// in one of [`PROMPT_PATHS`] (a trailing `/` aside).
pub fn is_prompt_path(url: &str) -> bool {
    let path = path_of(url).trim_end_matches('/');
    PROMPT_PATHS.iter().any(|end| path.ends_with(end))
}

/// The part of [`NOT_PROMPT_PATHS`] that marks a request to `url` as taking no prompt.
pub fn not_a_prompt(url: &str) -> Option<&'static str> {
    let path = path_of(url);
    NOT_PROMPT_PATHS
        .iter()
        .find(|endpoint| path.contains(*endpoint))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_paths_and_calls_without_a_prompt() {
        for url in [
            "/v1/chat/completions",
            "https://api.openai.com/v1/responses?stream=true",
            "/v1/messages/",
        ] {
            assert!(is_prompt_path(url), "{url}");
            assert_eq!(not_a_prompt(url), None, "{url}");
        }
        for (url, endpoint) in [
            ("https://api.openai.com/v1/embeddings", "embeddings"),
            ("/v1/messages/count_tokens", "count_tokens"),
            ("/v1beta/models/gemini:countTokens", ":countTokens"),
        ] {
            assert_eq!(not_a_prompt(url), Some(endpoint), "{url}");
        }
        assert!(!is_prompt_path("/v1/messages/count_tokens"));
        assert!(!is_prompt_path("/v1/completions"));
        // A query is not the path.
        assert_eq!(not_a_prompt("/v1/chat/completions?x=embeddings"), None);
    }
}
