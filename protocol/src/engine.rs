//! The engines and APIs kvlint knows, by name, and the one reader of their specs
//! (`NAME[:option,key=value,…]`, as `--engine` takes them).
//!
//! What each crate builds from a spec is its own: `kvlint-core`'s cache model (`vllm:block=16`,
//! `llamacpp:cache-reuse=256`, `anthropic:MODEL`), the fleet simulation's replica engine
//! (`llamacpp:slots=4`), the probe's server kind, the request layer engine mode renders
//! through. The names, their spellings and the way options are read are this module's.
//!
//! ```
//! use kvlint_protocol::engine::{EngineName, Spec};
//!
//! let spec = Spec::parse("vllm:block=32,spec");
//! assert_eq!(spec.engine(), Ok(EngineName::Vllm));
//! spec.only(&["block", "spec"]).unwrap();
//! assert_eq!(spec.positive("block", 16), Ok(32));
//! assert!(spec.flag("spec"));
//! assert_eq!(Spec::parse("llama.cpp").engine(), Ok(EngineName::LlamaCpp));
//! ```

use std::fmt;
use std::str::FromStr;

/// An engine or hosted API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineName {
    Vllm,
    Sglang,
    LlamaCpp,
    OpenAi,
    Anthropic,
    Gemini,
    DeepSeek,
    Xai,
}

impl EngineName {
    pub const ALL: [Self; 8] = [
        Self::Vllm,
        Self::Sglang,
        Self::LlamaCpp,
        Self::OpenAi,
        Self::Anthropic,
        Self::Gemini,
        Self::DeepSeek,
        Self::Xai,
    ];

    /// The name as written in specs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::LlamaCpp => "llamacpp",
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::DeepSeek => "deepseek",
            Self::Xai => "xai",
        }
    }

    /// An engine by name; llama.cpp also as `llama.cpp`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "llama.cpp" => Some(Self::LlamaCpp),
            _ => Self::ALL.into_iter().find(|engine| engine.as_str() == name),
        }
    }

    /// Whether it is an inference engine one runs (vLLM, SGLang, llama.cpp), rather than a
    /// hosted API.
    pub fn is_self_hosted(self) -> bool {
        matches!(self, Self::Vllm | Self::Sglang | Self::LlamaCpp)
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EngineName {
    type Err = SpecError;

    fn from_str(name: &str) -> Result<Self, SpecError> {
        Spec::parse(name).engine()
    }
}

impl serde::Serialize for EngineName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A spec as written: `NAME`, then after a `:` options separated by commas, each a flag
/// (`spec`) or `key=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec<'a> {
    pub text: &'a str,
    pub name: &'a str,
    pub options: Vec<&'a str>,
}

impl<'a> Spec<'a> {
    pub fn parse(text: &'a str) -> Self {
        let (name, options) = text.split_once(':').unwrap_or((text, ""));
        Self {
            text,
            name,
            options: options
                .split(',')
                .filter(|option| !option.is_empty())
                .collect(),
        }
    }

    /// An error about this spec.
    pub fn error(&self, reason: impl Into<String>) -> SpecError {
        SpecError {
            spec: self.text.to_owned(),
            reason: reason.into(),
        }
    }

    /// The engine the spec names.
    pub fn engine(&self) -> Result<EngineName, SpecError> {
        EngineName::from_name(self.name).ok_or_else(|| self.error("not an engine kvlint models"))
    }

    /// Fails on an option whose key is not one of `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), SpecError> {
        match self.options.iter().find(|option| {
            let key = option.split_once('=').map_or(**option, |(key, _)| key);
            !allowed.contains(&key)
        }) {
            Some(option) => Err(self.error(format!("unknown option `{option}`"))),
            None => Ok(()),
        }
    }

    /// The value of `key=value`, when given.
    pub fn value(&self, key: &str) -> Option<&'a str> {
        self.options
            .iter()
            .find_map(|option| option.strip_prefix(key)?.strip_prefix('='))
    }

    /// Whether the flag `key` is given (alone, without a value).
    pub fn flag(&self, key: &str) -> bool {
        self.options.contains(&key)
    }

    /// `key=N`, a whole number above zero, or `default`.
    pub fn positive(&self, key: &str, default: u64) -> Result<u64, SpecError> {
        self.number(key, default)?
            .filter(|value| *value > 0)
            .ok_or_else(|| self.error(format!("`{key}` must be a positive integer")))
    }

    /// `key=N`, a whole number (zero too), or `default`.
    pub fn whole(&self, key: &str, default: u64) -> Result<u64, SpecError> {
        self.number(key, default)?
            .ok_or_else(|| self.error(format!("`{key}` must be a whole number")))
    }

    fn number(&self, key: &str, default: u64) -> Result<Option<u64>, SpecError> {
        match self.value(key) {
            None => Ok(Some(default)),
            Some(value) => Ok(value.parse().ok()),
        }
    }

    /// The options as one text: a hosted API's model name (`openai:gpt-4o`), `None` without.
    pub fn rest(&self) -> Option<String> {
        (!self.options.is_empty()).then(|| self.options.join(","))
    }
}

/// A spec that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    pub spec: String,
    pub reason: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.spec, self.reason)
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_llama_cpp_has_two_spellings() {
        for engine in EngineName::ALL {
            assert_eq!(EngineName::from_name(engine.as_str()), Some(engine));
        }
        assert_eq!("llama.cpp".parse(), Ok(EngineName::LlamaCpp));
        assert_eq!(
            "tgi"
                .parse::<EngineName>()
                .map_err(|error| error.to_string()),
            Err("`tgi`: not an engine kvlint models".to_owned())
        );
        assert!(EngineName::Sglang.is_self_hosted());
        assert!(!EngineName::DeepSeek.is_self_hosted());
    }

    #[test]
    fn options_are_read_and_checked() {
        let spec = Spec::parse("llamacpp:slots=4,cache-reuse=0");
        assert_eq!(spec.name, "llamacpp");
        assert_eq!(spec.positive("slots", 1), Ok(4));
        assert_eq!(spec.whole("cache-reuse", 0), Ok(0));
        assert_eq!(spec.positive("block", 16), Ok(16));
        assert_eq!(
            spec.positive("cache-reuse", 1)
                .map_err(|error| error.reason),
            Err("`cache-reuse` must be a positive integer".to_owned())
        );
        assert_eq!(
            spec.only(&["slots"]).map_err(|error| error.reason),
            Err("unknown option `cache-reuse=0`".to_owned())
        );
        assert_eq!(spec.only(&["slots", "cache-reuse"]), Ok(()));
        assert_eq!(
            Spec::parse("openai:gpt-4o,mini").rest().as_deref(),
            Some("gpt-4o,mini")
        );
        assert_eq!(Spec::parse("deepseek").rest(), None);
        assert_eq!(
            Spec::parse("vllm:block=x")
                .positive("block", 16)
                .map_err(|error| error.reason),
            Err("`block` must be a positive integer".to_owned())
        );
    }
}
