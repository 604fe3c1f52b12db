//! Which HTTP endpoints carry a prompt, and which hosted API a URL's host names.
//!
//! Two questions, answered from one list each: is a request to this path a prompt kvlint
//! analyses (the proxy, an OpenAI Batch line, the Python clients' hooks), and is it a call a
//! recording holds that takes no prompt at all (passed over with the reason when grouping a
//! recording into sessions; any other JSON body in a known format is read as a prompt there,
//! whatever its path, since recorders keep gateways' and providers' own paths).

use crate::engine::EngineName;

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

/// The hosted APIs' hosts, each the default base URL of the provider's own client:
/// anthropic-sdk-python `src/anthropic/_client.py` (`Anthropic.__init__`:
/// `https://api.anthropic.com`), openai-python `src/openai/_client.py` (`OpenAI.__init__`:
/// `https://api.openai.com/v1`), python-genai `google/genai/_api_client.py` (the Gemini API's
/// `https://generativelanguage.googleapis.com/`), and DeepSeek's API docs ("Your First API
/// Call", <https://api-docs.deepseek.com/>: `https://api.deepseek.com`), and xAI's
/// (<https://docs.x.ai/developers/advanced-api-usage/prompt-caching/maximizing-cache-hits>:
/// `curl https://api.x.ai/v1/chat/completions`). Bedrock
/// (`bedrock-runtime.REGION.amazonaws.com`) is not one: no engine model knows its cache.
pub const HOSTED_API_HOSTS: [(&str, EngineName); 5] = [
    ("api.anthropic.com", EngineName::Anthropic),
    ("api.openai.com", EngineName::OpenAi),
    ("generativelanguage.googleapis.com", EngineName::Gemini),
    ("api.deepseek.com", EngineName::DeepSeek),
    ("api.x.ai", EngineName::Xai),
];

/// The host of a whole URL (`https://HOST[:port]/…`), lower-cased; `None` for a path.
pub fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_and_port = authority.rsplit('@').next().unwrap_or_default();
    let host = host_and_port.split(':').next().unwrap_or_default();
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The hosted API a request to `host` went to ([`HOSTED_API_HOSTS`]); `None` for any other
/// host (a self-hosted engine, a gateway, a proxy).
pub fn hosted_api(host: &str) -> Option<EngineName> {
    HOSTED_API_HOSTS
        .iter()
        .find(|(known, _)| *known == host)
        .map(|(_, api)| *api)
}

/// The path of a URL or path, without its query and fragment.
pub fn path_of(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or_default()
}

/// The endpoint a request to `url` (a path or a whole URL) caches under: its path, the
/// streamed variant of an endpoint read as the plain one, as both reach the same model and
/// the same cache. Bedrock's `…/invoke-with-response-stream` is `…/invoke` and
/// `…/converse-stream` is `…/converse` (the Bedrock Runtime API reference: `InvokeModel` and
/// `InvokeModelWithResponseStream`, `Converse` and `ConverseStream`, one model each); Gemini's
/// `:streamGenerateContent` is `:generateContent` (ai.google.dev's API reference,
/// `models.streamGenerateContent`: "Generates a streamed response from the model given an
/// input `GenerateContentRequest`").
///
/// ```
/// use kvlint_protocol::endpoint::cache_endpoint;
///
/// assert_eq!(
///     cache_endpoint("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke-with-response-stream"),
///     cache_endpoint("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke"),
/// );
/// assert_eq!(cache_endpoint("/model/m/converse-stream"), "/model/m/converse");
/// assert_eq!(
///     cache_endpoint("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
///     "/v1beta/models/gemini-2.5-flash:generateContent",
/// );
/// ```
pub fn cache_endpoint(url: &str) -> String {
    let path = path_of(url);
    for (streamed, plain) in [
        ("/invoke-with-response-stream", "/invoke"),
        ("/converse-stream", "/converse"),
        (":streamGenerateContent", ":generateContent"),
    ] {
        if let Some(stem) = path.strip_suffix(streamed) {
            return format!("{stem}{plain}");
        }
    }
    path.to_owned()
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

    #[test]
    fn a_urls_host_names_the_hosted_api_it_went_to() {
        for (url, api) in [
            (
                "https://api.anthropic.com/v1/messages",
                Some(EngineName::Anthropic),
            ),
            (
                "https://API.OpenAI.com:443/v1/chat/completions?x=1",
                Some(EngineName::OpenAi),
            ),
            (
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
                Some(EngineName::Gemini),
            ),
            (
                "https://api.deepseek.com/chat/completions",
                Some(EngineName::DeepSeek),
            ),
            ("https://api.x.ai/v1/responses", Some(EngineName::Xai)),
            // Self-hosted engines, gateways and hosts no engine model knows: no provider.
            ("http://localhost:8080/v1/chat/completions", None),
            ("https://openrouter.ai/api/v1/chat/completions", None),
            (
                "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/converse",
                None,
            ),
            ("https://api.openai.com.evil.example/v1/responses", None),
        ] {
            assert_eq!(host_of(url).as_deref().and_then(hosted_api), api, "{url}");
        }
        assert_eq!(host_of("/v1/messages"), None);
        assert_eq!(
            host_of("https://user@api.anthropic.com/v1"),
            Some("api.anthropic.com".into())
        );
    }
}
