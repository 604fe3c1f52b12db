//! What the upstream serves from cache, predicted per turn, and what a turn that extends its
//! session's previous prompt lost, with the cause.

use std::sync::Arc;
use std::time::Duration;

use kvlint_core::cache::{CacheTurn, Earlier, ReportedUsage};
use kvlint_core::render::Rendered;
use kvlint_core::request::{BodyFormat, Request};
use kvlint_protocol::EngineName;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use super::Analysis;
use crate::probe::{Client, chat_request, engine_tokens, predicted_cached};
use crate::proxy::Exchange;

/// Prompts kept per replica to model its cache; older ones count as evicted.
const RECENT_PROMPTS: usize = 64;

/// How long the analysis waits for an engine's tokens or metrics.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the analysis knows of an upstream.
pub(super) enum UpstreamModel {
    /// A self-hosted engine: its tokens and cache model.
    SelfHosted {
        client: Client,
        kind: EngineName,
        model: kvlint_core::cache::Engine,
    },
    /// A hosted API: kvlint's rendering and the API's cache model.
    Hosted(kvlint_core::cache::Engine),
}

/// One accepted turn, as the predictions read it.
pub(super) struct Turn<'a> {
    pub(super) exchange: &'a Exchange,
    pub(super) body: &'a Value,
    pub(super) request: &'a Request,
    pub(super) rendered: &'a Rendered,
    pub(super) usage: Option<ReportedUsage>,
}

impl Analysis {
    /// What `upstream` is, found once: the kind given, a hosted API by its host, else a
    /// self-hosted engine detected from its endpoints.
    pub(super) fn upstream_model(&mut self, upstream: &Arc<str>) -> Option<Arc<UpstreamModel>> {
        if let Some(known) = self.upstreams.get(upstream) {
            return known.clone();
        }
        let client = engine_client(upstream, &self.engine_probe.authorities);
        let kind = self
            .engine_probe
            .kind
            .or_else(|| hosted_kind(upstream))
            .unwrap_or_else(|| client.detect());
        let model = client.cache_model(kind, None);
        let known = Some(Arc::new(match kind {
            _ if !kind.is_self_hosted() => UpstreamModel::Hosted(model),
            _ => UpstreamModel::SelfHosted {
                client,
                kind,
                model,
            },
        }));
        self.upstreams.insert(Arc::clone(upstream), known.clone());
        known
    }

    /// A self-hosted engine: predicts the turn's cached tokens from the engine's tokens and
    /// what its replica was sent, and counts what the session lost when the engine served
    /// less than the session's previous prompt made reusable.
    pub(super) fn predict_engine(
        &mut self,
        index: usize,
        turn: &Turn<'_>,
        (client, kind, model): (&Client, EngineName, &kvlint_core::cache::Engine),
        replica: Option<String>,
    ) {
        let chat = match turn.request.format {
            BodyFormat::OpenAiChat => None,
            _ => Some(chat_request(turn.request, None)),
        };
        let Ok(tokens) = engine_tokens(client, kind, chat.as_ref().unwrap_or(turn.body)) else {
            return;
        };
        let session = &mut self.sessions[index];
        // Not told which replica: modelled as the one the session was on.
        let modelled = replica
            .clone()
            .or_else(|| session.previous_prompt.as_ref()?.1.clone())
            .unwrap_or_default();
        let seen = self.replicas.entry(modelled).or_default();
        let predicted = predicted_cached(model, &tokens, seen.iter().map(Vec::as_slice));
        self.metrics.predicted(&turn.exchange.upstream, predicted);
        if let Some(((previous, previous_replica), reported)) =
            session.previous_prompt.as_ref().zip(turn.usage)
        {
            let reusable = predicted_cached(model, &tokens, [previous.as_slice()]);
            if reported.cached_tokens < reusable {
                let cause = match (previous_replica, &replica) {
                    (Some(before), Some(now)) if before != now => "locality",
                    (Some(_), Some(_)) if predicted < reusable => "eviction",
                    _ => "unknown",
                };
                let lost = reusable - reported.cached_tokens;
                self.metrics.lost(&turn.exchange.upstream, cause, lost);
                eprintln!(
                    "kvlint proxy: session {} turn {}: {lost} prompt tokens computed again ({cause}; replica {}, previous turn on {})",
                    index + 1,
                    session.turns,
                    shown(replica.as_deref()),
                    shown(previous_replica.as_deref()),
                );
            }
        }
        seen.push_back(tokens.clone());
        if seen.len() > RECENT_PROMPTS {
            seen.pop_front();
        }
        session.previous_prompt = Some((tokens, replica));
    }

    /// A hosted API: predicts the turn's cached tokens with the API's cache model over
    /// kvlint's rendering of this turn and the previous one, in the API's tokens (scaled by
    /// the prompt tokens it reported), and counts what the session lost when the API served
    /// clearly less: a prompt under the API's minimum, a prefix older than its TTL, or
    /// unknown (another machine, an eviction).
    pub(super) fn predict_hosted(
        &mut self,
        index: usize,
        turn: &Turn<'_>,
        model: &kvlint_core::cache::Engine,
    ) {
        let session = &self.sessions[index];
        let current = CacheTurn::new(turn.request, turn.rendered, 0);
        let Some((previous_request, previous_rendered)) = session.previous.as_ref() else {
            self.metrics.predicted(&turn.exchange.upstream, 0);
            return;
        };
        let previous = CacheTurn::new(previous_request, previous_rendered, 0);
        let common = previous_rendered
            .tokens
            .common_prefix_len(&turn.rendered.tokens);
        let earlier = Earlier {
            prompt_tokens: previous.prompt_tokens,
            common_prompt: common,
            common_sequence: common,
            written: model.writes(&previous),
        };
        let predicted = model.predict(&current, &[earlier]).cached;
        // The API's tokenizer is not kvlint's: counts scale by the prompt it reported.
        let rendered_tokens = current.prompt_tokens.max(1) as f64;
        let scale = turn
            .usage
            .and_then(|usage| usage.prompt_tokens)
            .map_or(1.0, |reported| reported as f64 / rendered_tokens);
        let in_api_tokens = |count: usize| (count as f64 * scale).round() as usize;
        self.metrics
            .predicted(&turn.exchange.upstream, in_api_tokens(predicted));
        let Some(reported) = turn.usage else {
            return;
        };
        let elapsed = session
            .previous_at
            .map(|at| turn.exchange.received.saturating_duration_since(at));
        let minimum = model.min_cacheable_tokens(&current).unwrap_or(0);
        let below_minimum = reported
            .prompt_tokens
            .is_some_and(|prompt| prompt < minimum);
        let Some((cause, lost)) = hosted_loss(HostedTurn {
            predicted: in_api_tokens(predicted),
            shared: in_api_tokens(common),
            reported,
            below_minimum,
            elapsed,
            ttl: model.cache_ttl(turn.request),
        }) else {
            return;
        };
        self.metrics.lost(&turn.exchange.upstream, cause, lost);
        eprintln!(
            "kvlint proxy: session {} turn {}: about {lost} prompt tokens computed again ({cause}{})",
            index + 1,
            session.turns,
            elapsed.map_or(String::new(), |elapsed| format!(
                "; {} s after the previous turn",
                elapsed.as_secs()
            )),
        );
    }
}

/// What a hosted API turn is judged on, in the API's tokens.
struct HostedTurn {
    /// What the cache model predicts the API serves.
    predicted: usize,
    /// Leading tokens the prompt shares with the session's previous one.
    shared: usize,
    reported: ReportedUsage,
    /// The reported prompt is shorter than the API caches.
    below_minimum: bool,
    /// Since the previous turn of the session.
    elapsed: Option<Duration>,
    ttl: Option<Duration>,
}

/// Tokens a hosted API computed that the session's previous turn had made reusable, with
/// the cause; `None` when it served what the model predicts, give or take what tokenizers
/// and rounding explain (128 tokens, a tenth of the prediction).
fn hosted_loss(turn: HostedTurn) -> Option<(&'static str, usize)> {
    let served = turn.reported.cached_tokens;
    if turn.below_minimum {
        return (served == 0 && turn.shared > 0).then_some(("below_minimum", turn.shared));
    }
    let tolerance = (turn.predicted / 10).max(128);
    if served + tolerance >= turn.predicted {
        return None;
    }
    let expired = turn
        .elapsed
        .zip(turn.ttl)
        .is_some_and(|(elapsed, ttl)| elapsed > ttl);
    let cause = if expired { "ttl" } else { "unknown" };
    Some((cause, turn.predicted - served))
}

/// A client for an engine's tokens or metrics, trusting `authorities` for https.
pub(in crate::proxy) fn engine_client(
    url: &str,
    authorities: &[CertificateDer<'static>],
) -> Client {
    let authorities: Vec<&[u8]> = authorities.iter().map(|der| der.as_ref()).collect();
    Client::trusting(url, ENGINE_TIMEOUT, &authorities)
}

/// The hosted API an upstream URL points at, by its host.
fn hosted_kind(url: &str) -> Option<EngineName> {
    let host = url.parse::<hyper::Uri>().ok()?.host()?.to_ascii_lowercase();
    match host.as_str() {
        "api.openai.com" => Some(EngineName::OpenAi),
        "api.anthropic.com" => Some(EngineName::Anthropic),
        _ => None,
    }
}

/// A replica's name in a log line.
fn shown(replica: Option<&str>) -> String {
    match replica {
        Some(name) => format!("{name:?}"),
        None => "unknown".into(),
    }
}
