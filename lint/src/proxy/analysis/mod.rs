//! The analysis beside the forwarding path: each exchange, once its response has ended, is
//! put into its session, checked against the session's previous request by the session's
//! [`kvlint_sdk::Guard`] (the pipeline `kvlint check` runs, `kvlint_rules::check_pair`,
//! parsing and rendering only what is new, as an application's guarded client does), counted,
//! and recorded. The sessions are kept by the SDK's [`kvlint_sdk::GuardSessions`], the one
//! session multiplexer the Python and npm guarded clients use too, which bounds them.
//!
//! It also predicts what the upstream serves from cache and classifies a turn that extends its
//! session's previous prompt but gets less than that prompt made reusable:
//! - a self-hosted engine, as `kvlint probe` does: the engine's own tokens (`/apply-template`
//!   and `/tokenize`, or `/tokenize`; Responses and Messages bodies in the chat shape the
//!   engine turns them into) and its cache model over what the replica that served the turn
//!   was sent. A loss is `locality` (another replica served it), `eviction` (the replica's
//!   cache moved on to other requests), else `unknown`;
//! - a hosted API (OpenAI, Anthropic): the guard's rendering and the API's cache model, scaled
//!   to the prompt tokens the API reported (its tokenizer is not public). A loss is
//!   `below_minimum` (a prompt shorter than the API caches), `ttl` (longer since the previous
//!   turn than the cache keeps a prefix), else `unknown`.
//!
//! - [`sessions`]: which session a request belongs to, and the sessions kept;
//! - [`predict`]: what the upstream serves from cache, and what a turn lost;
//! - [`record`]: the session files written with `--record`;
//! - [`signed`]: the thinking blocks and reasoning items a request sends back, against what the
//!   API returned, and the refusals and drops predicted and reported.

mod predict;
mod record;
mod sessions;
mod signed;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use kvlint_core::cache::{ReportedUsage, reported_usage};
use kvlint_core::response::parse_response;
use kvlint_protocol::EngineName;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::request::Request;
use kvlint_sdk::{GuardSessions, Observed, Placed};
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use super::Exchange;
use super::forward::header;
use super::metrics::Metrics;
use predict::{Predictions, Turn};
use record::Recorder;
use sessions::Session;

pub(super) use predict::engine_client;

/// How to reach the upstreams for their tokens, and what they are when the user said.
pub(super) struct EngineProbe {
    pub(super) kind: Option<EngineName>,
    /// Certificate authorities trusted for https upstreams (`--upstream-ca`).
    pub(super) authorities: Vec<CertificateDer<'static>>,
    /// `false` (`--no-prediction`): no predictions, no requests to the engine.
    pub(super) predict: bool,
    /// Where the engine is asked for its tokens and settings when the upstream is a gateway:
    /// the first `--replica-metrics` replica (`None`: the upstream itself), so that the
    /// proxy's own requests do not pass through the gateway's balancing.
    pub(super) side: Option<String>,
}

/// How the analysis tells which replica served a request.
pub(super) enum ReplicaSource {
    /// Several `--upstream`s: the one the proxy sent it to.
    Upstream,
    /// A gateway's response header naming the replica; without it the replica is not known
    /// (one engine and a gateway that does not say look alike).
    Header(String),
    /// The gateway's header when it sends one, else the replica the exchange was found to
    /// be served by through the replicas' metrics (`--replica-metrics`).
    Metrics(String),
}

pub(super) struct Analysis {
    /// The sessions kept, and which session each request belongs to.
    sessions: GuardSessions<Session>,
    predictions: Predictions,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    replica_source: ReplicaSource,
    /// Accepted exchanges analysed so far: each one's request id in the replicas' caches.
    exchanges: u64,
}

impl Analysis {
    pub(super) fn new(
        metrics: Arc<Metrics>,
        record: Option<PathBuf>,
        redact: bool,
        engine_probe: EngineProbe,
        replica_source: ReplicaSource,
    ) -> Self {
        Self {
            sessions: sessions::kept(),
            predictions: Predictions::new(engine_probe, Arc::clone(&metrics)),
            recorder: Recorder::new(record, redact),
            metrics,
            replica_source,
            exchanges: 0,
        }
    }

    /// Analyses exchanges until the forwarding side is gone.
    pub(super) fn run(mut self, exchanges: Receiver<Exchange>) {
        for exchange in exchanges {
            self.observe(&exchange);
        }
    }

    fn observe(&mut self, exchange: &Exchange) {
        let Some(body) = exchange
            .is_prompt()
            .then(|| serde_json::from_slice::<Value>(&exchange.request).ok())
            .flatten()
        else {
            return;
        };
        let replica = self.replica(exchange);
        let response_text = String::from_utf8_lossy(&exchange.response);
        let response = parse_response(&response_text);
        let usage = response.as_ref().and_then(reported_usage);
        let placed = self.session_for(exchange, &body);
        self.check_signed_history(
            &placed,
            exchange,
            &body,
            (response.as_ref(), &response_text),
        );
        let accepted = exchange.complete && (200..300).contains(&exchange.status);
        // Recorded when `kvlint check` can read it back: a request kvlint reads.
        let (readable, avoidable) = if accepted {
            let checked = self.check(
                &placed,
                exchange,
                &body,
                (response.as_ref(), usage),
                &replica,
            );
            (checked.is_some(), checked.unwrap_or(0))
        } else {
            (
                self.recorder.is_on() && Request::from_body(&body).is_ok(),
                0,
            )
        };
        if readable && self.recorder.is_on() {
            let served_by = replica.filter(|name| !name.is_empty());
            if let Ok(session) = self.sessions.guard_for(&placed.key) {
                self.recorder.record(
                    &mut session.record,
                    placed.joined.session,
                    &body,
                    (response, &response_text),
                    exchange,
                    served_by,
                );
            }
        }
        // Counted last: a scrape that sees the request sees all it changed.
        let model = body.get("model").and_then(Value::as_str);
        let figures = self.predictions.figures(&exchange.upstream, model);
        self.metrics.request(
            (&exchange.upstream, placed.joined.kind),
            usage,
            avoidable,
            figures,
        );
    }

    /// Checks an accepted turn with its session's guard, which then holds it as the session's
    /// previous turn; counts its break and predicts what the upstream served. Returns the
    /// prompt tokens the session had made reusable that the upstream computed again (its
    /// avoidable misses); `None` when the guard cannot read the body.
    fn check(
        &mut self,
        placed: &Placed,
        exchange: &Exchange,
        body: &Value,
        (response, usage): (Option<&Value>, Option<ReportedUsage>),
        replica: &Option<String>,
    ) -> Option<usize> {
        let key = &placed.key;
        let observation = match self.sessions.observe_as(key.clone(), body.clone(), 0) {
            Ok(Observed::Checked { body, .. }) => body.outcome.clone(),
            Ok(Observed::Retry) | Err(_) => return None,
        };
        let broken: usize = observation
            .iter()
            .map(|finding| self.count_break(exchange, finding, observation.prompt_tokens(), usage))
            .sum();
        self.exchanges += 1;
        let Some(Session {
            guard,
            previous,
            answer,
            ..
        }) = self.sessions.guard_mut(key)
        else {
            return Some(broken);
        };
        *answer = response.map(signed::answer).unwrap_or_default();
        let Some(accepted) = guard.last_accepted() else {
            return Some(broken);
        };
        let turn = Turn {
            exchange,
            session: placed.joined.session,
            number: guard.counters().turns.saturating_sub(1),
            id: self.exchanges as usize,
            body,
            request: accepted.request,
            rendered: accepted.rendered,
            reused_tokens: observation.reused_tokens(),
            response,
            usage,
        };
        let lost = self.predictions.predict(previous, &turn, replica.clone());
        Some(broken + lost.unwrap_or(0))
    }

    /// The replica that served `exchange`: `None` when it cannot be told.
    fn replica(&self, exchange: &Exchange) -> Option<String> {
        let named =
            |header_name: &str| header(&exchange.response_headers, header_name).map(str::to_owned);
        match &self.replica_source {
            ReplicaSource::Upstream => Some(exchange.upstream.to_string()),
            ReplicaSource::Header(name) => named(name),
            ReplicaSource::Metrics(name) => named(name).or_else(|| exchange.replica.clone()),
        }
    }

    /// An application's break: counted by its rule, and the tokens it made the upstream
    /// compute again counted as lost with the rule as the cause, in the upstream's tokens
    /// (kvlint's count, out of the `rendered_tokens` of the prompt, scaled by the prompt the
    /// upstream reported: its tokenizer may differ). Returns those tokens.
    fn count_break(
        &self,
        exchange: &Exchange,
        finding: &Diagnostic,
        rendered_tokens: usize,
        usage: Option<ReportedUsage>,
    ) -> usize {
        self.metrics.finding(&exchange.upstream, finding.rule);
        let scale = usage
            .and_then(|usage| usage.prompt_tokens)
            .map_or(1.0, |reported| {
                reported as f64 / rendered_tokens.max(1) as f64
            });
        let lost = (finding.tokens_lost as f64 * scale).round() as usize;
        self.metrics.lost(&exchange.upstream, finding.rule, lost);
        lost
    }
}
