//! The engines and APIs kvlint models: their `--engine` spelling, and which hit formula and
//! write positions apply to each.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use kvlint_protocol::{EngineName, Spec, SpecError};
use serde_json::Value;

use super::breakpoints::anthropic_breakpoints;
use kvlint_fleet::cache::{SGLANG_PAGE_SIZE, VLLM_BLOCK_SIZE, llamacpp_hit, sglang_hit, vllm_hit};

use super::hits::{
    OPENAI_MINIMUM, XAI_BLOCK, anthropic_hit, breakpoint_hit, gemini_hit, openai_hit,
    readable_units, xai_hit,
};
use super::models::{MODELS, ModelFigures};
use super::turn::{CacheTurn, Earlier, Prediction};
use kvlint_request::request::Request;

/// An engine or API whose prefix cache kvlint predicts, as given to `--engine NAME[:options]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `vllm[:block=16][,spec]`
    Vllm { block: usize, speculative: bool },
    /// `sglang[:page=1]`
    Sglang { page: usize },
    /// `llamacpp[:cache-reuse=N]`
    LlamaCpp { cache_reuse: usize },
    /// `openai[:MODEL]`
    OpenAi { model: Option<String> },
    /// `anthropic[:MODEL]`
    Anthropic { model: Option<String> },
    /// `gemini[:MODEL]`
    Gemini { model: Option<String> },
    /// `deepseek`
    DeepSeek,
    /// `xai[:MODEL]`
    Xai { model: Option<String> },
}

impl Engine {
    /// Which engine or API this models.
    pub fn id(&self) -> EngineName {
        match self {
            Self::Vllm { .. } => EngineName::Vllm,
            Self::Sglang { .. } => EngineName::Sglang,
            Self::LlamaCpp { .. } => EngineName::LlamaCpp,
            Self::OpenAi { .. } => EngineName::OpenAi,
            Self::Anthropic { .. } => EngineName::Anthropic,
            Self::Gemini { .. } => EngineName::Gemini,
            Self::DeepSeek => EngineName::DeepSeek,
            Self::Xai { .. } => EngineName::Xai,
        }
    }

    /// The spec that names this model exactly (`vllm:block=16`, `anthropic:MODEL`).
    pub fn name(&self) -> String {
        let name = self.id().as_str();
        match self {
            Self::Vllm { block, speculative } => {
                format!(
                    "{name}:block={block}{}",
                    if *speculative { ",spec" } else { "" }
                )
            }
            Self::Sglang { page } => format!("{name}:page={page}"),
            Self::LlamaCpp { cache_reuse: 0 } | Self::DeepSeek => name.to_owned(),
            Self::LlamaCpp { cache_reuse } => format!("{name}:cache-reuse={cache_reuse}"),
            Self::OpenAi { model }
            | Self::Anthropic { model }
            | Self::Gemini { model }
            | Self::Xai { model } => match model {
                Some(model) => format!("{name}:{model}"),
                None => name.to_owned(),
            },
        }
    }

    /// Whether the engine keeps the tokens it generates in its cache (self-hosted engines
    /// do; hosted APIs cache prompts).
    pub fn keeps_generated_tokens(&self) -> bool {
        matches!(
            self,
            Self::Vllm { .. } | Self::Sglang { .. } | Self::LlamaCpp { .. } | Self::DeepSeek
        )
    }

    /// The provider whose price and minimum figures apply, for hosted APIs.
    pub fn provider(&self) -> Option<&'static str> {
        let id = self.id();
        (!id.is_self_hosted()).then(|| id.as_str())
    }

    /// The figures of the model a turn uses: the engine's model, else the request's.
    pub fn figures(&self, turn: &CacheTurn) -> Option<&'static ModelFigures> {
        MODELS.lookup(self.provider()?, self.model(turn).unwrap_or_default())
    }

    /// The model a turn uses, for hosted APIs: the engine's (`openai:gpt-4o`), else the
    /// request's.
    pub fn model<'a>(&'a self, turn: &'a CacheTurn) -> Option<&'a str> {
        let named = match self {
            Self::OpenAi { model }
            | Self::Anthropic { model }
            | Self::Gemini { model }
            | Self::Xai { model } => model.as_deref(),
            _ => None,
        };
        named.or(turn.model.as_deref())
    }

    /// What this engine serves from cache for `turn`, given the earlier turns of the session
    /// (oldest first; the last is the turn right before).
    pub fn predict(&self, turn: &CacheTurn, earlier: &[Earlier]) -> Prediction {
        let longest_sequence = earlier
            .iter()
            .map(|entry| entry.common_sequence)
            .max()
            .unwrap_or(0);
        let longest_prompt = earlier
            .iter()
            .map(|entry| entry.common_prompt)
            .max()
            .unwrap_or(0);
        let n = turn.prompt_tokens;
        match self {
            Self::Vllm { block, speculative } => Prediction {
                cached: vllm_hit(n, longest_sequence, *block, *speculative),
                written: 0,
            },
            Self::Sglang { page } => Prediction {
                cached: sglang_hit(n, longest_sequence, *page),
                written: 0,
            },
            Self::LlamaCpp { .. } => Prediction {
                cached: llamacpp_hit(
                    n,
                    earlier
                        .last()
                        .map_or(0, |previous| previous.common_sequence),
                ),
                written: 0,
            },
            Self::OpenAi { .. } => {
                let figures = self.figures(turn);
                if figures.is_some_and(|figures| figures.breakpoints) {
                    breakpoint_hit(turn, earlier, &self.writes(turn), OPENAI_MINIMUM)
                } else {
                    Prediction {
                        cached: openai_hit(n, longest_prompt),
                        written: 0,
                    }
                }
            }
            Self::Anthropic { .. } => {
                let minimum = self
                    .figures(turn)
                    .map_or(1024, |figures| figures.min_cacheable_tokens);
                anthropic_hit(turn, earlier, minimum)
            }
            Self::Gemini { .. } => {
                let minimum = self
                    .figures(turn)
                    .map_or(1024, |figures| figures.min_cacheable_tokens);
                Prediction {
                    cached: gemini_hit(longest_prompt, minimum),
                    written: 0,
                }
            }
            Self::DeepSeek => Prediction {
                cached: readable_units(earlier),
                written: 0,
            },
            Self::Xai { .. } => {
                let minimum = self
                    .figures(turn)
                    .map_or(XAI_BLOCK, |figures| figures.min_cacheable_tokens);
                Prediction {
                    cached: xai_hit(n, longest_prompt, minimum),
                    written: 0,
                }
            }
        }
    }

    /// How long a hosted API keeps a prefix after its last use, as `request` asks it to:
    /// Anthropic's `cache_control` `ttl` (`5m` by default, `1h`), OpenAI's
    /// `prompt_cache_options.ttl` (`30m`, `12h`) or `prompt_cache_retention: "24h"`, else its
    /// default: 30 minutes on the models with cache breakpoints (GPT-5.6 and later: "The `ttl`
    /// defaults to `30m`", OpenAI's API reference for `prompt_cache_options`; the GPT-6.2 Sol
    /// page prices a write "for 30 minutes of retention", read 2026-12-07), the in-memory
    /// retention before them ("typically cleared after 5–10 min idle": the shorter bound).
    /// `None` for self-hosted engines (no expiry: they evict) and APIs that do not say (xAI:
    /// "Cache entries can be evicted at any time due to server load or restarts", its prompt
    /// caching best practices, read 2026-12-07).
    pub fn cache_ttl(&self, request: &Request) -> Option<Duration> {
        const FIVE_MINUTES: Duration = Duration::from_secs(5 * 60);
        let body = &request.body;
        match self {
            Self::Anthropic { .. } => Some(
                cache_control_ttls(body)
                    .into_iter()
                    .filter_map(|ttl| parse_ttl(&ttl))
                    .max()
                    .unwrap_or(FIVE_MINUTES),
            ),
            Self::OpenAi { model } => {
                let asked = body
                    .pointer("/prompt_cache_options/ttl")
                    .or_else(|| body.get("prompt_cache_retention"))
                    .and_then(Value::as_str)
                    .and_then(parse_ttl);
                let named = model
                    .as_deref()
                    .or_else(|| body.get("model").and_then(Value::as_str))
                    .unwrap_or_default();
                let default = match MODELS.lookup("openai", named) {
                    Some(figures) if figures.breakpoints => Duration::from_secs(30 * 60),
                    _ => FIVE_MINUTES,
                };
                Some(asked.unwrap_or(default))
            }
            _ => None,
        }
    }

    /// The longer lifetime the API sells, and its write price as a multiple of the input
    /// price: Anthropic's `ttl: "1h"` ("1-hour cache write tokens are 2 times the base input
    /// tokens price", platform.claude.com prompt caching, pricing; read 2026-12-07), OpenAI's
    /// `prompt_cache_options.ttl: "12h"` on the breakpoint models (2.5× input, the GPT-6.2 Sol
    /// page). `None` for the APIs that sell none.
    pub fn longer_lifetime(&self, figures: &ModelFigures) -> Option<(Duration, f64)> {
        match self {
            Self::Anthropic { .. } => Some((Duration::from_secs(3600), 2.0)),
            Self::OpenAi { .. } if figures.breakpoints => {
                Some((Duration::from_secs(12 * 3600), 2.5))
            }
            _ => None,
        }
    }

    /// The shortest prompt a hosted API caches, for the model `turn` uses.
    pub fn min_cacheable_tokens(&self, turn: &CacheTurn) -> Option<usize> {
        self.provider()?;
        Some(
            self.figures(turn)
                .map_or(OPENAI_MINIMUM, |figures| figures.min_cacheable_tokens),
        )
    }

    /// The cache entries this turn leaves for later turns (token positions), for the models
    /// that cache at marked points rather than at every token.
    pub fn writes(&self, turn: &CacheTurn) -> Vec<usize> {
        match self {
            Self::Anthropic { .. } => anthropic_breakpoints(turn),
            Self::OpenAi { .. } => {
                let mut positions: Vec<usize> = turn
                    .breakpoint_blocks
                    .iter()
                    .filter_map(|block| turn.block_ends.get(*block).copied())
                    .collect();
                positions.push(turn.latest_input_end);
                positions.sort_unstable();
                positions.dedup();
                positions
            }
            Self::DeepSeek => vec![
                turn.prompt_tokens,
                turn.prompt_tokens + turn.generated_tokens,
            ],
            _ => Vec::new(),
        }
    }
}

/// Every `cache_control.ttl` in a body (tools, system and message blocks, the top level).
fn cache_control_ttls(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![body];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(object) => {
                if let Some(ttl) = object
                    .get("cache_control")
                    .and_then(|control| control.get("ttl"))
                    .and_then(Value::as_str)
                {
                    found.push(ttl.to_owned());
                }
                pending.extend(object.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    found
}

/// A cache lifetime as the APIs write it: `5m`, `1h`, `30m`, `12h`, `24h`, `90s`, `1d` (and
/// `in_memory`, which says nothing of a length: `None`).
pub fn parse_ttl(text: &str) -> Option<Duration> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(number.checked_mul(seconds)?))
}

/// `--engine NAME[:options]` could not be read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("unknown engine `{spec}`: {reason}")]
#[diagnostic(
    code(kvlint::engine),
    help(
        "one of vllm[:block=16][,spec], sglang[:page=1], llamacpp[:cache-reuse=N], openai[:MODEL], anthropic[:MODEL], gemini[:MODEL], deepseek, xai[:MODEL]"
    )
)]
pub struct EngineSpecError {
    pub spec: String,
    pub reason: String,
}

impl FromStr for Engine {
    type Err = EngineSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let spec = Spec::parse(text);
        let engine = match spec.engine()? {
            EngineName::Vllm => {
                spec.only(&["block", "spec"])?;
                Self::Vllm {
                    block: spec.positive("block", VLLM_BLOCK_SIZE.into())? as usize,
                    speculative: spec.flag("spec"),
                }
            }
            EngineName::Sglang => {
                spec.only(&["page"])?;
                Self::Sglang {
                    page: spec.positive("page", SGLANG_PAGE_SIZE.into())? as usize,
                }
            }
            EngineName::LlamaCpp => {
                spec.only(&["cache-reuse"])?;
                Self::LlamaCpp {
                    cache_reuse: spec.whole("cache-reuse", 0)? as usize,
                }
            }
            EngineName::OpenAi => Self::OpenAi { model: spec.rest() },
            EngineName::Anthropic => Self::Anthropic { model: spec.rest() },
            EngineName::Gemini => Self::Gemini { model: spec.rest() },
            EngineName::DeepSeek => {
                spec.only(&[])?;
                Self::DeepSeek
            }
            EngineName::Xai => Self::Xai { model: spec.rest() },
        };
        Ok(engine)
    }
}

impl From<SpecError> for EngineSpecError {
    fn from(error: SpecError) -> Self {
        Self {
            spec: error.spec,
            reason: error.reason,
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_specs_parse_and_print() {
        for (spec, name) in [
            ("vllm", "vllm:block=16"),
            ("vllm:block=32,spec", "vllm:block=32,spec"),
            ("sglang:page=64", "sglang:page=64"),
            ("llamacpp", "llamacpp"),
            ("openai:gpt-4o", "openai:gpt-4o"),
            ("anthropic", "anthropic"),
            ("deepseek", "deepseek"),
            ("xai:grok-4.7", "xai:grok-4.7"),
        ] {
            assert_eq!(
                spec.parse::<Engine>()
                    .map(|engine| engine.name())
                    .ok()
                    .as_deref(),
                Some(name),
                "{spec}"
            );
        }
        for bad in [
            "vllm:block=0",
            "vllm:blocks=16",
            "tgi",
            "sglang:page=x",
            "deepseek:x",
        ] {
            assert!(bad.parse::<Engine>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_hosted_cache_keeps_a_prefix_as_long_as_the_request_asks() {
        let request = |body: Value| Request::from_body(&body).unwrap();
        let anthropic = Engine::Anthropic { model: None };
        let openai = Engine::OpenAi { model: None };
        let minutes = |count: u64| Some(Duration::from_secs(count * 60));
        let plain =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
        assert_eq!(anthropic.cache_ttl(&request(plain.clone())), minutes(5));
        assert_eq!(openai.cache_ttl(&request(plain.clone())), minutes(5));
        let hour = serde_json::json!({"model": "m", "system": [
            {"type": "text", "text": "Rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]});
        assert_eq!(anthropic.cache_ttl(&request(hour)), minutes(60));
        let day = serde_json::json!({"model": "m", "prompt_cache_retention": "24h",
            "messages": [{"role": "user", "content": "Hi"}]});
        assert_eq!(openai.cache_ttl(&request(day)), minutes(24 * 60));
        let half_hour = serde_json::json!({"model": "m", "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
            "messages": [{"role": "user", "content": "Hi"}]});
        assert_eq!(openai.cache_ttl(&request(half_hour)), minutes(30));
        // GPT-5.6 and later keep a prefix 30 minutes unless asked otherwise.
        let newer = serde_json::json!({"model": "gpt-6.2-sol",
            "messages": [{"role": "user", "content": "Hi"}]});
        assert_eq!(openai.cache_ttl(&request(newer)), minutes(30));
        assert_eq!(
            Engine::LlamaCpp { cache_reuse: 0 }.cache_ttl(&request(plain)),
            None
        );
    }
}
