//! The report of a run: plain data, built once, read by every emitter.
//!
//! Its JSON form is a contract (`version` 1): fields may be added, never renamed or removed.
//! This file holds `kvlint check`'s report and what every report shares (the version, an
//! input's error, a checked file as the file-based emitters read it); each other command's
//! report has its own file. Emitters read these and nothing else; commands build them.

pub mod diff;
pub mod import;
pub mod probe;
pub mod render;
pub mod template;

use std::path::Path;
use std::sync::Arc;

use kvlint_core::cache::{Engine, MODELS, Prediction, TurnCachePrediction};
use kvlint_core::diff::TurnDiff;

use crate::workspace::config::{Config, ConfigError};
use kvlint_core::session::{RepeatedKey, SessionFile, Skipped};
use kvlint_render::render::Renderer;
use kvlint_request::diagnostic::{Diagnostic, Severity, SeverityCounts};
use kvlint_request::error::InputError;
use kvlint_rules::{BelowCacheMinimum, NoCacheBreakpoint, NoCacheRoutingKey};
use serde::Serialize;

pub const REPORT_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Report {
    pub version: u32,
    pub sessions: Vec<SessionReport>,
    /// Files that could not be analysed; the rest of the run still is.
    pub errors: Vec<ErrorReport>,
}

/// How a session was found in a recording (`"source"` in the JSON report).
#[derive(Debug, Clone, Serialize)]
pub struct RecordingSource {
    /// `vcr-yaml`, `vcr-msgpack`, `go-vcr`, `ruby-vcr`, `har`, `inspect` or `otlp`.
    pub container: &'static str,
    /// The recording.
    pub file: String,
    /// Its number among the recording's sessions (from 1), and how many there are.
    pub session: usize,
    pub sessions: usize,
    /// The recording's interactions (0-based) its turns came from.
    pub interactions: Vec<usize>,
    /// Bodies rebuilt from a trace's span attributes: findings that depend on the bytes
    /// sent (`json-reserialized`) are not claimed.
    pub reconstructed: bool,
    /// How it was told apart from the recording's other sessions: the session key's source,
    /// and the turns read one way where another was possible.
    pub grouped_by: kvlint_protocol::grouping::GroupedBy,
    /// The number of the session that spawned it (a sub-agent's parent), when the recording
    /// holds it.
    pub parent: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct SessionReport {
    pub path: String,
    /// The request format of the session's turns (`mixed` when they differ).
    pub format: String,
    pub renderer: String,
    /// Token counts come from an encoding other than the provider's own.
    pub approximate: bool,
    pub turns: Vec<TurnReport>,
    pub findings: Vec<Diagnostic>,
    pub summary: SessionSummary,
    /// What the chosen engine serves from cache, with `--engine`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSummary>,
    /// Requests in the file that are not prompts, passed over.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Keys a body gives twice in one object: kvlint reads the last value, a provider may not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeated_keys: Vec<RepeatedKey>,
    /// For a session found in a recording: how it was found.
    #[serde(rename = "source", skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingSource>,
    /// Without an engine: the hosted API the input itself showed, when the session audit
    /// (KV503–KV505) found something under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_provider: Option<ImpliedProvider>,
    /// The text findings are placed in (the session file's, or the recording's).
    #[serde(skip)]
    pub source: Arc<str>,
    /// What the session's first request leaves in a hosted API's cache, for the audit of a
    /// recording's sessions together (cold starts).
    #[serde(skip)]
    pub opening: Option<kvlint_core::cache::Opening>,
    /// With an engine: each turn's predicted cache use, for [`Self::read_at_opening`].
    #[serde(skip)]
    predictions: Option<Vec<TurnCachePrediction>>,
}

/// The hosted API a session was sent to as its input shows it, when neither an engine nor a
/// chat template was given: the session audit (KV503–KV505) runs under it, nothing else does.
#[derive(Debug, Clone, Serialize)]
pub struct ImpliedProvider {
    /// `anthropic`, `openai`, `gemini` or `deepseek`.
    pub engine: &'static str,
    /// What showed it: `the request URL's host api.openai.com`, `the request format`.
    pub implied_by: String,
}

/// A turn: its diff against the turn before and, with `--engine`, the predicted cache use.
#[derive(Debug, Serialize)]
pub struct TurnReport {
    #[serde(flatten)]
    pub diff: TurnDiff,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_cached_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computed_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<usize>,
    /// Tokens the engine generated for the turn before that this turn does not reproduce.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated_not_reproduced: Option<usize>,
    /// What the recorded response reports: the prompt and the tokens read from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_prompt_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_cached_tokens: Option<usize>,
}

impl TurnReport {
    fn of(diff: TurnDiff) -> Self {
        Self {
            diff,
            predicted_cached_tokens: None,
            computed_tokens: None,
            cache_write_tokens: None,
            generated_not_reproduced: None,
            reported_prompt_tokens: None,
            reported_cached_tokens: None,
        }
    }

    /// Takes the turn's predicted cache use.
    fn predicted(&mut self, prediction: &TurnCachePrediction) {
        self.predicted_cached_tokens = Some(prediction.recorded.cached);
        self.computed_tokens = Some(prediction.prompt_tokens - prediction.recorded.cached);
        self.cache_write_tokens = Some(prediction.recorded.written).filter(|written| *written > 0);
        self.generated_not_reproduced = prediction.generated_not_reproduced;
        self.reported_prompt_tokens = prediction.reported.and_then(|usage| usage.prompt_tokens);
        self.reported_cached_tokens = prediction.reported.map(|usage| usage.cached_tokens);
    }
}

#[derive(Debug, Serialize)]
pub struct CacheSummary {
    pub engine: String,
    pub prompt_tokens: usize,
    /// Prompt tokens served from cache.
    pub cached_tokens: usize,
    /// Prompt tokens computed (prefilled).
    pub computed_tokens: usize,
    pub cache_write_tokens: usize,
    pub hit_ratio: f64,
    /// The same session if every turn extended the one before.
    pub stable_prefix_cached_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostEstimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_seconds: Option<Estimate>,
}

/// USD for the session: as recorded, and with a stable prefix.
#[derive(Debug, Serialize)]
pub struct CostEstimate {
    pub recorded_usd: f64,
    pub stable_prefix_usd: f64,
    /// The model row prices come from, and the table's date.
    pub model: String,
    pub prices_as_of: String,
    pub prices_verified: bool,
    /// A model missing from the price table (or no model named), whose figures are its
    /// provider's defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unlisted_model: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Estimate {
    pub recorded: f64,
    pub stable_prefix: f64,
}

/// How kvlint predicts cache use, from `--engine` and `--prefill-tps`.
#[derive(Debug, Clone, Default)]
pub struct CacheOptions {
    pub engine: Option<Engine>,
    pub prefill_tokens_per_second: Option<f64>,
    /// The Anthropic account the prefix check of returned thinking blocks runs on.
    pub account: kvlint_rules::thinking::Account,
}

#[derive(Debug, Serialize)]
pub struct SessionSummary {
    pub turns: usize,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    /// Reused over prompt tokens of all turns after the first.
    pub reuse_ratio: f64,
    #[serde(flatten)]
    pub findings: SeverityCounts,
}

/// One checked file as the file-based emitters (SARIF, GitHub, JUnit) read it: its findings,
/// and its turns (JUnit's test cases).
pub struct CheckedFile<'a> {
    pub path: &'a str,
    pub turns: usize,
    pub findings: &'a [Diagnostic],
}

/// An input that could not be analysed: its path and message (the JSON form), and the error
/// itself, with its place, for human output.
#[derive(Debug, Serialize)]
pub struct ErrorReport {
    pub path: String,
    /// The error and its causes, on one line.
    pub message: String,
    #[serde(skip)]
    pub diagnostic: Box<dyn miette::Diagnostic + Send + Sync>,
}

impl ErrorReport {
    pub fn new(path: String, error: impl miette::Diagnostic + Send + Sync + 'static) -> Self {
        let mut message = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(inner) = cause {
            message.push_str(": ");
            message.push_str(&inner.to_string());
            cause = inner.source();
        }
        Self {
            path,
            message,
            diagnostic: Box::new(error),
        }
    }
}

impl From<InputError> for ErrorReport {
    fn from(error: InputError) -> Self {
        Self::new(error.path().to_owned(), error)
    }
}

impl From<ConfigError> for ErrorReport {
    fn from(error: ConfigError) -> Self {
        Self::new(error.path.clone(), error)
    }
}

impl Report {
    pub fn new() -> Self {
        Self {
            version: REPORT_VERSION,
            sessions: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The sessions as the file-based emitters read them.
    pub fn checked_files(&self) -> Vec<CheckedFile<'_>> {
        self.sessions
            .iter()
            .map(|session| CheckedFile {
                path: &session.path,
                turns: session.turns.len(),
                findings: &session.findings,
            })
            .collect()
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.sessions
            .iter()
            .flat_map(|session| &session.findings)
            .filter(|finding| finding.severity == severity)
            .count()
    }
}

impl SessionReport {
    /// The session's first request reads what an earlier session of the recording left in
    /// the cache (`read`, the engine's prediction for it): its turn and the cache summary say
    /// so.
    pub fn read_at_opening(&mut self, read: Prediction, engine: &Engine, prefill_tps: Option<f64>) {
        let Some(predictions) = &mut self.predictions else {
            return;
        };
        let Some(first) = predictions.first_mut() else {
            return;
        };
        first.recorded = read;
        first.stable = read;
        if let Some(turn) = self.turns.first_mut() {
            turn.predicted(first);
        }
        self.cache = Some(cache_summary(engine, predictions, prefill_tps));
    }

    /// A recording's session whose first request read from the cache while nothing the
    /// recording sent before explains it (the prediction, what earlier sessions left
    /// included, is no read): a warm hit from a request the recording never saw, its kind
    /// says so.
    pub fn name_warm_hit(&mut self) {
        let Some(turn) = self.turns.first() else {
            return;
        };
        let warm = turn
            .reported_cached_tokens
            .zip(turn.predicted_cached_tokens)
            .is_some_and(|(reported, predicted)| reported > 0 && predicted == 0);
        let first = self
            .recording
            .as_mut()
            .and_then(|recording| recording.grouped_by.kinds.first_mut());
        if let (true, Some(kind)) = (warm, first) {
            *kind = kvlint_protocol::grouping::RequestKind::WarmHit;
        }
    }

    /// Adds findings only the sessions of a recording together show, in turn order, and
    /// recounts.
    pub fn add_findings(&mut self, findings: impl IntoIterator<Item = Diagnostic>) {
        self.findings.extend(findings);
        self.findings.sort_by_key(|finding| finding.turn);
        self.summary.findings = SeverityCounts::of(&self.findings);
    }

    /// Applies a configuration's rule levels, ignores and threshold, and recounts.
    pub fn apply_config(&mut self, config: &Config) {
        let findings = std::mem::take(&mut self.findings);
        self.findings = config.apply(Path::new(&self.path), findings);
        self.summary.findings = SeverityCounts::of(&self.findings);
    }
}

fn cache_summary(
    engine: &Engine,
    turns: &[TurnCachePrediction],
    prefill_tps: Option<f64>,
) -> CacheSummary {
    let prompt_tokens: usize = turns.iter().map(|turn| turn.prompt_tokens).sum();
    let cached_tokens: usize = turns.iter().map(|turn| turn.recorded.cached).sum();
    let stable_cached: usize = turns.iter().map(|turn| turn.stable.cached).sum();
    let cost = turns.iter().all(|turn| turn.figures.is_some()).then(|| {
        let total = |pick: fn(&TurnCachePrediction) -> kvlint_core::cache::Prediction| -> f64 {
            turns
                .iter()
                .filter_map(|turn| {
                    turn.figures
                        .map(|figures| figures.cost(turn.prompt_tokens, pick(turn)))
                })
                .sum()
        };
        let figures = turns.first().and_then(|turn| turn.figures);
        CostEstimate {
            recorded_usd: round(total(|turn| turn.recorded), 6),
            stable_prefix_usd: round(total(|turn| turn.stable), 6),
            model: figures
                .map(|figures| format!("{}/{}", figures.provider, figures.name))
                .unwrap_or_default(),
            prices_as_of: MODELS.as_of.clone(),
            prices_verified: turns
                .iter()
                .all(|turn| turn.figures.is_some_and(|figures| figures.verified)),
            // A provider's default row (no name) stands in for a model the table lacks.
            unlisted_model: turns.iter().find_map(|turn| {
                let figures = turn.figures?;
                figures
                    .name
                    .is_empty()
                    .then(|| turn.model.clone().unwrap_or_default())
            }),
        }
    });
    let computed_tokens = prompt_tokens - cached_tokens;
    CacheSummary {
        engine: engine.name(),
        prompt_tokens,
        cached_tokens,
        computed_tokens,
        cache_write_tokens: turns.iter().map(|turn| turn.recorded.written).sum(),
        hit_ratio: if prompt_tokens == 0 {
            0.0
        } else {
            round(cached_tokens as f64 / prompt_tokens as f64, 3)
        },
        stable_prefix_cached_tokens: stable_cached,
        cost: cost.filter(|_| !turns.is_empty()),
        prefill_seconds: prefill_tps.filter(|tps| *tps > 0.0).map(|tps| Estimate {
            recorded: round(computed_tokens as f64 / tps, 3),
            stable_prefix: round((prompt_tokens - stable_cached) as f64 / tps, 3),
        }),
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

impl SessionReport {
    pub fn new(
        session: &SessionFile,
        renderer: &Renderer,
        options: &CacheOptions,
    ) -> Result<Self, InputError> {
        // A chat template given says a self-hosted model renders the prompts: none implied.
        let implied = match (&options.engine, renderer) {
            (None, Renderer::Provider { .. }) => kvlint_rules::ImpliedProvider::of(session),
            _ => None,
        };
        let checked = match &implied {
            Some(implied) => kvlint_rules::check_session_under_implied_provider(
                session,
                renderer,
                &implied.engine,
                options.account,
            )?,
            None => kvlint_rules::check_session_on(
                session,
                renderer,
                options.engine.as_ref(),
                options.account,
            )?,
        };
        let session_audit_rules = [
            NoCacheBreakpoint::META.name,
            NoCacheRoutingKey::META.name,
            BelowCacheMinimum::META.name,
        ];
        let implied_provider = implied
            .map(|implied| ImpliedProvider {
                engine: implied.api.as_str(),
                implied_by: implied.implied_by,
            })
            .filter(|_| {
                checked
                    .findings
                    .iter()
                    .any(|finding| session_audit_rules.contains(&finding.rule))
            });
        let formats: Vec<_> = session.formats().collect();
        let format = match formats.first() {
            Some(first) if formats.iter().all(|format| format == first) => first.name().to_owned(),
            Some(_) => "mixed".to_owned(),
            None => "empty".to_owned(),
        };
        let approximate = formats
            .iter()
            .any(|format| renderer.is_approximate(*format));
        let later_prompt_tokens: usize = checked
            .turns
            .iter()
            .skip(1)
            .map(|turn| turn.prompt_tokens)
            .sum();
        let reused_tokens = checked.reused_tokens();
        let summary = SessionSummary {
            turns: checked.turns.len(),
            prompt_tokens: checked.prompt_tokens(),
            reused_tokens,
            reuse_ratio: if later_prompt_tokens == 0 {
                0.0
            } else {
                round(reused_tokens as f64 / later_prompt_tokens as f64, 3)
            },
            findings: SeverityCounts::of(&checked.findings),
        };
        let cache = options
            .engine
            .as_ref()
            .zip(checked.predictions.as_deref())
            .map(|(engine, predictions)| {
                cache_summary(engine, predictions, options.prefill_tokens_per_second)
            });
        let opening = checked.opening;
        let turns = checked
            .turns
            .into_iter()
            .enumerate()
            .map(|(index, diff)| {
                let mut turn = TurnReport::of(diff);
                if let Some(prediction) = checked
                    .predictions
                    .as_ref()
                    .and_then(|predictions| predictions.get(index))
                {
                    turn.predicted(prediction);
                }
                turn
            })
            .collect();
        Ok(Self {
            path: session.path.clone(),
            format,
            renderer: renderer.name(),
            approximate,
            turns,
            findings: checked.findings,
            summary,
            cache,
            skipped: session.skipped.clone(),
            repeated_keys: session.repeated_keys.clone(),
            recording: session.origin.as_ref().map(|origin| RecordingSource {
                container: origin.container,
                file: session.path.clone(),
                session: origin.session,
                sessions: origin.sessions,
                interactions: origin.interactions.clone(),
                reconstructed: origin.reconstructed,
                grouped_by: origin.grouped_by.clone(),
                parent: origin.parent,
            }),
            implied_provider,
            opening,
            predictions: checked.predictions,
            source: Arc::clone(session.source_text()),
        })
    }
}
