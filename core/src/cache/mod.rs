//! Engine cache models: how many prompt tokens of a turn each engine or API serves from its
//! cache, given what earlier turns of the session left there.
//!
//! Every model reads the same facts about a turn ([`CacheTurn`]) and about each earlier turn
//! ([`Earlier`]); the facts behind each rule, with their sources, are in the doc comments of
//! the hit formulas and in `shared/reference/engines.md`. Per-model figures that change
//! over time (minimum cacheable lengths, prices) live in `data/models.toml`, not in code.
//!
//! The files: `engine` names a cache ([`Engine`]) and dispatches to its formula: the
//! self-hosted engines' in `kvlint_fleet::cache` (one rule, which `kvlint simulate`'s caches
//! apply too), the hosted APIs' in `hits`;
//! `turn` holds the facts every formula reads; `breakpoints` Anthropic's breakpoint
//! positions and their audit; `models` the per-model figures; `prediction` a whole session's
//! view and every engine's prediction over it; `session_audit` what only the whole session
//! shows (prompts under the minimum, no breakpoint, no routing key); `cold` what only the
//! sessions of a recording together show (a session that starts cold on a prefix another
//! session sent).

mod breakpoints;
mod cold;
mod engine;
mod hits;
mod models;
mod prediction;
mod reported;
mod session_audit;
mod turn;

pub use breakpoints::{
    ANTHROPIC_LOOKBACK_BLOCKS, ANTHROPIC_MAX_BREAKPOINTS, BreakpointIssue, BreakpointIssueKind,
    audit_breakpoints,
};
pub use cold::{ColdCause, ColdStartIssue, Opening, OpeningAudit, audit_cold_starts};
pub use engine::{Engine, EngineSpecError, parse_ttl};
pub use hits::{
    DEEPSEEK_UNIT, OPENAI_INCREMENT, OPENAI_MINIMUM, anthropic_hit, gemini_hit, openai_hit,
};
pub use models::{MODELS, ModelFigures, ModelTable};
pub use prediction::{
    IdleFixes, IdleIssue, KeepAlive, LongerLifetime, SessionCacheView, TurnCachePrediction,
};
pub use reported::{ReportedUsage, UsageIssue, UsageIssueKind, audit_reported, reported_usage};
pub use session_audit::{SessionIssue, audit_session};
pub use turn::{CacheTurn, Earlier, Prediction, generated_text};
