//! Per-model figures (minimum cacheable length, prices) from `data/models.toml`: they change
//! over time, so they are data, not code.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::turn::Prediction;

/// Per-model figures from `data/models.toml`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct ModelFigures {
    pub provider: String,
    /// Matched as a prefix of the request's model name; empty matches any model.
    pub name: String,
    pub min_cacheable_tokens: usize,
    /// USD per million tokens.
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    #[serde(default)]
    pub breakpoints: bool,
    /// The provider's page the figures are read from (a third party's only where no provider
    /// page has them: then not `verified`).
    pub source: String,
    /// A short quote, or the figures as `source` prints them.
    pub quote: String,
    /// When `source` was read (`YYYY-MM-DD`).
    pub checked: String,
    /// Where sources disagree or a figure is assumed: who says what, and which value the row
    /// uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<String>,
    /// Every figure was seen on the provider's own page and still applies on `checked`.
    pub verified: bool,
}

impl ModelFigures {
    /// The cost in USD of one turn.
    pub fn cost(&self, prompt_tokens: usize, prediction: Prediction) -> f64 {
        let fresh = prompt_tokens.saturating_sub(prediction.cached + prediction.written);
        (fresh as f64 * self.input
            + prediction.cached as f64 * self.cached_input
            + prediction.written as f64 * self.cache_write)
            / 1_000_000.0
    }

    /// What a token costs written to the cache: the write price, or the input price where
    /// writes cost no more.
    pub fn write_price(&self) -> f64 {
        self.cache_write.max(self.input)
    }

    /// What `tokens` cost more written again than read from the cache, in USD: a miss the
    /// cache could have served.
    pub fn rewrite_dollars(&self, tokens: usize) -> f64 {
        tokens as f64 * (self.write_price() - self.cached_input) / 1_000_000.0
    }
}

/// The dated table of model figures.
#[derive(Debug, Deserialize)]
pub struct ModelTable {
    pub as_of: String,
    #[serde(rename = "model")]
    pub models: Vec<ModelFigures>,
}

impl ModelTable {
    /// The row for a model: the longest name that prefixes it, else the provider's fallback.
    pub fn lookup(&self, provider: &str, model: &str) -> Option<&ModelFigures> {
        self.models
            .iter()
            .filter(|row| row.provider == provider && model.starts_with(&row.name))
            .max_by_key(|row| row.name.len())
    }
}

/// The embedded table; an unreadable table (a build with a broken data file) is empty.
pub static MODELS: LazyLock<ModelTable> = LazyLock::new(|| {
    toml::from_str(include_str!("../../data/models.toml")).unwrap_or(ModelTable {
        as_of: String::new(),
        models: Vec::new(),
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_table_is_readable_and_dated() {
        assert!(!MODELS.as_of.is_empty());
        assert!(MODELS.models.len() >= 20);
        for provider in ["openai", "anthropic", "gemini", "deepseek", "xai"] {
            assert!(
                MODELS.lookup(provider, "some-future-model").is_some(),
                "{provider} has a fallback row"
            );
        }
        let sonnet = MODELS
            .lookup("anthropic", "claude-sonnet-4-5-20250929")
            .map(|row| row.name.as_str());
        assert_eq!(sonnet, Some("claude-sonnet-4-5"));
        let fable = MODELS
            .lookup("anthropic", "claude-fable-5-2-20261109")
            .map(|row| row.name.as_str());
        assert_eq!(fable, Some("claude-fable-5-2"));
    }

    /// A figure without its source is a guess: every row names the page, quotes it and says
    /// when it was read.
    #[test]
    fn every_row_carries_its_source_a_quote_and_the_date_it_was_checked() {
        let date = |text: &str| {
            let bytes = text.as_bytes();
            bytes.len() == 10
                && bytes.iter().enumerate().all(|(index, byte)| match index {
                    4 | 7 => *byte == b'-',
                    _ => byte.is_ascii_digit(),
                })
        };
        for row in &MODELS.models {
            let name = format!("{} {:?}", row.provider, row.name);
            assert!(row.source.starts_with("https://"), "{name}: source");
            assert!(!row.quote.trim().is_empty(), "{name}: quote");
            assert!(date(&row.checked), "{name}: checked {:?}", row.checked);
            assert!(
                row.checked.as_str() <= MODELS.as_of.as_str(),
                "{name}: checked after the table's date"
            );
        }
        assert!(date(&MODELS.as_of));
    }
}
