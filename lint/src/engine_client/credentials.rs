//! API keys: read from the environment, sent each only in its own provider's header, and
//! never shown: every key value, `Authorization` / `x-api-key` echoes and the userinfo of
//! an engine URL are redacted from whatever text a server sends back or a report prints.

use std::sync::LazyLock;

use regex::Regex;

/// Which API's authentication a client sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// OpenAI and OpenAI-compatible engines: `Authorization: Bearer` with `KVLINT_API_KEY`,
    /// else `OPENAI_API_KEY`.
    #[default]
    OpenAiCompatible,
    /// Anthropic: `x-api-key` with `ANTHROPIC_API_KEY`.
    Anthropic,
}

/// The keys of the environment.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    openai: Option<String>,
    anthropic: Option<String>,
}

const REDACTED: &str = "[redacted]";

/// A header that carries a credential, echoed in an error body.
static CREDENTIAL_ECHO: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(authorization|x-api-key)(["']?\s*[:=]\s*["']?)(?:bearer\s+)?[^\s"',}]+"#)
        .ok()
});

impl Credentials {
    pub fn from_environment() -> Self {
        let key = |name: &str| std::env::var(name).ok().filter(|key| !key.is_empty());
        Self {
            openai: key("KVLINT_API_KEY").or_else(|| key("OPENAI_API_KEY")),
            anthropic: key("ANTHROPIC_API_KEY"),
        }
    }

    /// The header authenticating a request to `api`, when its key is set.
    pub fn header(&self, api: Api) -> Option<(&'static str, String)> {
        match api {
            Api::OpenAiCompatible => self
                .openai
                .as_ref()
                .map(|key| ("authorization", format!("Bearer {key}"))),
            Api::Anthropic => self.anthropic.clone().map(|key| ("x-api-key", key)),
        }
    }

    /// `text` without any key value this process holds or any credential header echoed.
    pub fn redact(&self, text: &str) -> String {
        let mut redacted = text.to_owned();
        for key in [&self.openai, &self.anthropic].into_iter().flatten() {
            redacted = redacted.replace(key.as_str(), REDACTED);
        }
        match CREDENTIAL_ECHO.as_ref() {
            Some(echo) => echo
                .replace_all(&redacted, format!("${{1}}${{2}}{REDACTED}"))
                .into_owned(),
            None => redacted,
        }
    }
}

/// An engine URL as shown: `user:password@` in it masked.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_go_only_to_their_own_header_and_never_back_out() {
        let credentials = Credentials {
            openai: Some("sk-openai-sentinel".into()),
            anthropic: Some("sk-ant-sentinel".into()),
        };
        assert_eq!(
            credentials.header(Api::Anthropic),
            Some(("x-api-key", "sk-ant-sentinel".to_owned()))
        );
        assert_eq!(
            credentials.header(Api::OpenAiCompatible),
            Some(("authorization", "Bearer sk-openai-sentinel".to_owned()))
        );
        let echoed = r#"{"error": "bad key sk-ant-sentinel", "headers": {"Authorization": "Bearer abc.def", "x-api-key": "other"}}"#;
        let redacted = credentials.redact(echoed);
        for secret in ["sk-ant-sentinel", "abc.def", "other"] {
            assert!(!redacted.contains(secret), "{redacted}");
        }
        assert!(redacted.contains("bad key [redacted]"), "{redacted}");
    }

    #[test]
    fn userinfo_is_masked_in_shown_urls() {
        assert_eq!(
            shown_url("http://ada:hunter2@127.0.0.1:8080/v1"),
            "http://***@127.0.0.1:8080/v1"
        );
        assert_eq!(shown_url("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(shown_url("http://127.0.0.1/a@b"), "http://127.0.0.1/a@b");
    }

    /// A pattern that does not compile is `None` at run time, and the credentials echoed in an
    /// error body would be shown unmasked: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(
            CREDENTIAL_ECHO.is_some(),
            "CREDENTIAL_ECHO does not compile"
        );
    }
}
