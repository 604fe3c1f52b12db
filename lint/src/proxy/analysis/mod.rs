//! The analysis beside the forwarding path: each exchange, once its response has ended, is
//! put into its session, checked against the session's previous request with the pipeline
//! `kvlint check` runs (`kvlint_rules::check_pair`), counted, and recorded.
//!
//! It also predicts what the upstream serves from cache and classifies a turn that extends its
//! session's previous prompt but gets less than that prompt made reusable:
//! - a self-hosted engine, as `kvlint probe` does: the engine's own tokens (`/apply-template`
//!   and `/tokenize`, or `/tokenize`; Responses and Messages bodies in the chat shape the
//!   engine turns them into) and its cache model over what the replica that served the turn
//!   was sent. A loss is `locality` (another replica served it), `eviction` (the replica's
//!   cache moved on to other requests), else `unknown`;
//! - a hosted API (OpenAI, Anthropic): kvlint's rendering and the API's cache model, scaled to
//!   the prompt tokens the API reported (its tokenizer is not public). A loss is
//!   `below_minimum` (a prompt shorter than the API caches), `ttl` (longer since the previous
//!   turn than the cache keeps a prefix), else `unknown`.
//!
//! - [`sessions`]: which session a request belongs to, and forgetting idle ones;
//! - [`predict`]: what the upstream serves from cache, and what a turn lost;
//! - [`record`]: the session files written with `--record`.

mod predict;
mod record;
mod sessions;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Instant;

use kvlint_core::cache::{ReportedUsage, reported_usage};
use kvlint_core::diff::RenderedRequest;
use kvlint_core::response::parse_response;
use kvlint_fleet::cache::ReplicaCache;
use kvlint_protocol::EngineName;
use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::locate::Unplaced;
use kvlint_request::request::Request;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use super::Exchange;
use super::forward::header;
use super::metrics::Metrics;
use predict::{Turn, UpstreamModel};

pub(super) use predict::engine_client;

/// A session's record goes on in a new file (`session-0007.2.jsonl`, …) past this size.
const RECORD_PART_BYTES: u64 = 256 << 20;

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

/// One session seen through the proxy.
struct Session {
    previous: Option<(Request, Rendered)>,
    /// When the previous request was received.
    previous_at: Option<Instant>,
    /// The previous prompt in the engine's tokens, and the replica that served it (`None`:
    /// not known).
    previous_prompt: Option<(predict::CachedPrompt, Option<String>)>,
    turns: usize,
    record: Option<BufWriter<File>>,
    /// Bytes in the record's current file, and which part of the record that file is.
    record_bytes: u64,
    record_part: usize,
    /// When the session was last seen, in exchanges.
    last_seen: u64,
}

pub(super) struct Analysis {
    renderer: Renderer,
    sessions: Vec<Session>,
    metrics: Arc<Metrics>,
    record: Option<PathBuf>,
    /// `--redact`: the key of this run's placeholders.
    redact: Option<std::hash::RandomState>,
    /// Which session each request belongs to; its sessions are `sessions`, index for index.
    grouping: kvlint_protocol::grouping::Grouping,
    engine_probe: EngineProbe,
    /// Per upstream, set up at its first prompt; `None` inside when it offers no tokens.
    upstreams: HashMap<Arc<str>, Option<Arc<UpstreamModel>>>,
    replica_source: ReplicaSource,
    /// Per replica (empty: not known), its cache as modelled from the prompts it was sent.
    replicas: HashMap<String, ReplicaCache>,
    /// Exchanges analysed so far: the clock of `Session::last_seen`.
    exchanges: u64,
    /// Sessions whose previous request is kept.
    live: usize,
    record_part_bytes: u64,
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
            renderer: Renderer::provider(),
            sessions: Vec::new(),
            metrics,
            record,
            redact: redact.then(std::hash::RandomState::new),
            grouping: Default::default(),
            engine_probe,
            upstreams: HashMap::new(),
            replica_source,
            replicas: HashMap::new(),
            exchanges: 0,
            live: 0,
            record_part_bytes: RECORD_PART_BYTES,
        }
    }

    /// Analyses exchanges until the forwarding side is gone.
    pub(super) fn run(mut self, exchanges: Receiver<Exchange>) {
        for exchange in exchanges {
            self.observe(&exchange);
        }
        for session in &mut self.sessions {
            if let Some(record) = session.record.as_mut() {
                let _ = record.flush();
            }
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
        let Ok(request) = Request::from_body(&body) else {
            return;
        };
        let response_text = String::from_utf8_lossy(&exchange.response);
        let response = parse_response(&response_text);
        let usage = response.as_ref().and_then(reported_usage);
        if let Ok(rendered) = self.renderer.render(&request) {
            let index = self.session_for(exchange, &body);
            self.exchanges += 1;
            self.sessions[index].last_seen = self.exchanges;
            let accepted = exchange.complete && (200..300).contains(&exchange.status);
            if accepted && let Some(finding) = self.check(index, &request, &rendered) {
                self.count_break(exchange, &finding, &rendered, usage);
            }
            if accepted && self.engine_probe.predict {
                let turn = Turn {
                    exchange,
                    body: &body,
                    request: &request,
                    rendered: &rendered,
                    response: response.as_ref(),
                    usage,
                };
                match self.upstream_model(&exchange.upstream).as_deref() {
                    Some(UpstreamModel::SelfHosted {
                        client,
                        kind,
                        engine,
                        size,
                    }) => self.predict_engine(
                        index,
                        &turn,
                        (client, *kind, *engine, *size),
                        replica.clone(),
                    ),
                    Some(UpstreamModel::Hosted(model)) => self.predict_hosted(index, &turn, model),
                    None => {}
                }
            }
            if accepted {
                self.advance(index, exchange, request, rendered);
            }
            let served_by = replica.filter(|name| !name.is_empty());
            self.record(
                index,
                &body,
                (response, &response_text),
                exchange,
                served_by,
            );
        }
        // Counted last: a scrape that sees the request sees all it changed.
        self.metrics.request(
            &exchange.upstream,
            usage.and_then(|usage| usage.prompt_tokens),
            usage.map(|usage| usage.cached_tokens),
        );
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

    /// The finding that names the break when the request does not extend its session's
    /// previous one.
    fn check(&self, index: usize, request: &Request, rendered: &Rendered) -> Option<Diagnostic> {
        let session = &self.sessions[index];
        let previous = session
            .previous
            .as_ref()
            .map(|(request, rendered)| RenderedRequest { request, rendered });
        let current = RenderedRequest { request, rendered };
        kvlint_rules::check_pair(
            previous,
            current,
            session.turns,
            self.renderer.tokenizer(),
            &Unplaced,
        )
        .1
    }

    /// An application's break: counted by its rule, and the tokens it made the upstream
    /// compute again counted as lost with the rule as the cause, in the upstream's tokens
    /// (kvlint's count scaled by the prompt the upstream reported: its tokenizer may differ).
    fn count_break(
        &self,
        exchange: &Exchange,
        finding: &Diagnostic,
        rendered: &Rendered,
        usage: Option<ReportedUsage>,
    ) {
        self.metrics.finding(&exchange.upstream, finding.rule);
        let scale = usage
            .and_then(|usage| usage.prompt_tokens)
            .map_or(1.0, |reported| {
                reported as f64 / rendered.tokens.len().max(1) as f64
            });
        let lost = (finding.tokens_lost as f64 * scale).round() as usize;
        self.metrics.lost(&exchange.upstream, finding.rule, lost);
    }

    /// The request becomes its session's previous one.
    fn advance(&mut self, index: usize, exchange: &Exchange, request: Request, rendered: Rendered) {
        let session = &mut self.sessions[index];
        if session.previous.is_none() {
            self.live += 1;
        }
        session.previous = Some((request, rendered));
        session.previous_at = Some(exchange.received);
        session.turns += 1;
        self.forget_idle();
    }
}
