//! What the upstream serves from cache, predicted per turn, and what a turn that extends its
//! session's previous prompt lost, with the cause.
//!
//! A self-hosted engine's replicas are modelled as `kvlint simulate` models them (one owner:
//! [`kvlint_fleet::cache`]): vLLM's block pool, SGLang's radix tree, llama.cpp's slots
//! chosen by prompt similarity with its host prompt cache (`--cache-ram`), which restores an
//! older prompt a slot gave up (`server_context::get_available_slot`, `server_slot::prompt_save`
//! and `prompt_load` in llama.cpp's `tools/server/server-context.cpp`), each holding the tokens
//! generated for a prompt after it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvlint_core::cache::{CacheTurn, Earlier, ReportedUsage, generated_text};
use kvlint_fleet::cache::{Prompt, ReplicaCache};
use kvlint_fleet::{CacheSize, SimEngine, chain_hash};
use kvlint_protocol::EngineName;
use kvlint_render::render::Rendered;
use kvlint_request::request::{BodyFormat, Request};
use rustls::pki_types::CertificateDer;
use serde_json::Value;

use super::EngineProbe;
use crate::engine_client::{Client, chat_request, engine_text_tokens, engine_tokens};
use crate::proxy::Exchange;
use crate::proxy::metrics::Metrics;

/// How long the analysis waits for an engine's tokens or metrics.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the analysis knows of an upstream.
enum UpstreamModel {
    /// A self-hosted engine: its tokens, and its replicas' caches as `kvlint simulate`
    /// models them.
    SelfHosted {
        client: Client,
        kind: EngineName,
        engine: SimEngine,
        size: CacheSize,
    },
    /// A hosted API: kvlint's rendering and the API's cache model.
    Hosted(kvlint_core::cache::Engine),
}

/// The predictions of what the upstreams serve from cache.
pub(super) struct Predictions {
    probe: EngineProbe,
    /// Per upstream, set up at its first prompt; `None` inside when it offers no tokens.
    upstreams: HashMap<Arc<str>, Option<Arc<UpstreamModel>>>,
    /// Per replica (empty: not known), its cache as modelled from the prompts it was sent.
    replicas: HashMap<String, ReplicaCache>,
    metrics: Arc<Metrics>,
}

/// What the predictions keep of a session's previous accepted turn.
#[derive(Default)]
pub(super) struct PreviousTurn {
    /// When it was received.
    at: Option<Instant>,
    /// As a hosted API's cache sees it.
    cache_turn: Option<CacheTurn>,
    /// In a self-hosted engine's tokens, with the replica that served it (`None`: not known).
    prompt: Option<(CachedPrompt, Option<String>)>,
}

/// One accepted turn, as the predictions read it: the guard's parse and rendering of it.
pub(super) struct Turn<'a> {
    pub(super) exchange: &'a Exchange,
    /// Its session's index, and which turn of the session it is (from 0).
    pub(super) session: usize,
    pub(super) number: usize,
    /// Which request it is among those analysed.
    pub(super) id: usize,
    pub(super) body: &'a Value,
    pub(super) request: &'a Request,
    pub(super) rendered: &'a Rendered,
    /// Leading tokens of `rendered` the session's previous turn shares.
    pub(super) reused_tokens: usize,
    pub(super) response: Option<&'a Value>,
    pub(super) usage: Option<ReportedUsage>,
}

/// A prompt as a replica's cache sees it: its blocks, and those the tokens generated for it
/// complete (chained as [`kvlint_fleet::Trace`] chains them).
pub(super) struct CachedPrompt {
    /// Which request it is, among those the analysis saw.
    request: usize,
    blocks: Vec<u64>,
    generated_blocks: Vec<u64>,
    tokens: u32,
    output_tokens: u32,
}
impl CachedPrompt {
    /// `ended`: whether the model ended the answer itself (an end-of-generation token), not a
    /// length limit ([`ended_by_the_model`]).
    fn new(
        request: usize,
        tokens: &[u32],
        generated: &[u32],
        ended: bool,
        block_size: u32,
    ) -> Self {
        let size = block_size.max(1) as usize;
        let mut last = 0;
        let mut chain = |block: &[u32]| {
            last = chain_hash(last, block);
            last
        };
        let blocks: Vec<u64> = tokens.chunks_exact(size).map(&mut chain).collect();
        // The prompt's last partial block and the generated tokens the engine computed: a
        // token is computed into the cache when the next one is sampled from it. The model
        // that ended its answer sampled an end-of-generation token after the last one; a
        // length limit stops right after sampling the last, which is never computed.
        let mut sequence = tokens[tokens.len() - tokens.len() % size..].to_vec();
        let computed = if ended {
            generated.len()
        } else {
            generated.len().saturating_sub(1)
        };
        sequence.extend_from_slice(&generated[..computed]);
        let generated_blocks = sequence.chunks_exact(size).map(&mut chain).collect();
        let count = |length: usize| u32::try_from(length).unwrap_or(u32::MAX);
        Self {
            request,
            blocks,
            generated_blocks,
            tokens: count(tokens.len()),
            output_tokens: count(generated.len()),
        }
    }

    /// As the cache models read it: matched through its blocks alone.
    fn prompt(&self) -> Prompt<'_> {
        Prompt {
            lineage: &|_| None,
            request: self.request,
            session: 0,
            previous: None,
            blocks: &self.blocks,
            generated_blocks: &self.generated_blocks,
            tokens: self.tokens,
            output_tokens: self.output_tokens,
            shared_with_previous_sequence: 0,
        }
    }

    /// The prompt alone, as if nothing had been generated after it.
    fn without_answer(&self) -> Prompt<'_> {
        Prompt {
            generated_blocks: &[],
            output_tokens: 0,
            ..self.prompt()
        }
    }
}

/// Whether the model ended the answer itself (`stop_reason` `end_turn`, `stop_sequence` or
/// `tool_use`; `finish_reason` `stop` or `tool_calls`) rather than a length limit
/// (`max_tokens`, `length`) or a reason not told.
fn ended_by_the_model(response: &Value) -> bool {
    let reason = response
        .get("stop_reason")
        .or_else(|| response.pointer("/choices/0/finish_reason"))
        .and_then(Value::as_str);
    matches!(
        reason,
        Some("end_turn" | "stop_sequence" | "tool_use" | "stop" | "tool_calls")
    )
}

/// What `engine` would serve of `prompt` on a replica that served `previous` alone.
fn reusable_after(engine: SimEngine, previous: &Prompt<'_>, prompt: &CachedPrompt) -> usize {
    let mut alone = engine.cache(CacheSize::Unbounded);
    alone.serve(previous);
    alone.peek(&prompt.prompt()) as usize
}

impl Predictions {
    pub(super) fn new(probe: EngineProbe, metrics: Arc<Metrics>) -> Self {
        Self {
            probe,
            upstreams: HashMap::new(),
            replicas: HashMap::new(),
            metrics,
        }
    }

    /// Predicts what the upstream served of `turn` and counts what it lost against the
    /// session's `previous` turn, which `turn` then becomes.
    /// Predicts what the upstream served for `turn`; the tokens the session's previous turn
    /// had made reusable that the upstream computed again, when it did (counted as lost).
    pub(super) fn predict(
        &mut self,
        previous: &mut PreviousTurn,
        turn: &Turn<'_>,
        replica: Option<String>,
    ) -> Option<usize> {
        if !self.probe.predict {
            return None;
        }
        let lost = match self.upstream_model(&turn.exchange.upstream).as_deref() {
            Some(UpstreamModel::SelfHosted {
                client,
                kind,
                engine,
                size,
            }) => self.predict_engine(previous, turn, (client, *kind, *engine, *size), replica),
            Some(UpstreamModel::Hosted(model)) => {
                let current = CacheTurn::new(turn.request, turn.rendered, 0);
                let lost = self.predict_hosted(previous, turn, &current, model);
                previous.cache_turn = Some(current);
                lost
            }
            None => None,
        };
        previous.at = Some(turn.exchange.received);
        lost
    }

    /// The prices of the model a request to `upstream` names, for a hosted API (known once
    /// the upstream's first prompt was predicted).
    pub(super) fn figures(
        &self,
        upstream: &Arc<str>,
        model: Option<&str>,
    ) -> Option<&'static kvlint_core::cache::ModelFigures> {
        let Some(Some(known)) = self.upstreams.get(upstream) else {
            return None;
        };
        let UpstreamModel::Hosted(engine) = known.as_ref() else {
            return None;
        };
        let provider = engine.provider()?;
        kvlint_core::cache::MODELS.lookup(provider, model.unwrap_or_default())
    }

    /// What `upstream` is, found once: the kind given, a hosted API by its host, else a
    /// self-hosted engine detected from its endpoints. The engine is asked at `side` (a replica
    /// named with `--replica-metrics`) when given, so that these requests do not pass through
    /// a gateway's balancing.
    fn upstream_model(&mut self, upstream: &Arc<str>) -> Option<Arc<UpstreamModel>> {
        if let Some(known) = self.upstreams.get(upstream) {
            return known.clone();
        }
        let side = self.probe.side.as_deref().unwrap_or(upstream);
        let client = engine_client(side, &self.probe.authorities);
        let kind = self
            .probe
            .kind
            .or_else(|| {
                kvlint_protocol::endpoint::host_of(upstream)
                    .and_then(|host| kvlint_protocol::endpoint::hosted_api(&host))
            })
            .unwrap_or_else(|| client.detect());
        let model = client.cache_model(kind, None);
        let known = match client.replica_cache(&model) {
            Some((engine, size)) if kind.is_self_hosted() => UpstreamModel::SelfHosted {
                client,
                kind,
                engine,
                size,
            },
            _ => UpstreamModel::Hosted(model),
        };
        let known = Some(Arc::new(known));
        self.upstreams.insert(Arc::clone(upstream), known.clone());
        known
    }

    /// A self-hosted engine: predicts the turn's cached tokens from the engine's tokens and
    /// the model of the replica that served it, and counts what the session lost when the
    /// engine served less than the session's previous turn made reusable.
    fn predict_engine(
        &mut self,
        previous: &mut PreviousTurn,
        turn: &Turn<'_>,
        (client, kind, engine, size): (&Client, EngineName, SimEngine, CacheSize),
        replica: Option<String>,
    ) -> Option<usize> {
        let chat = match turn.request.format {
            BodyFormat::OpenAiChat => None,
            _ => Some(chat_request(turn.request, None)),
        };
        let Ok(tokens) = engine_tokens(client, kind, chat.as_ref().unwrap_or(turn.body)) else {
            return None;
        };
        let generated = turn
            .response
            .and_then(generated_text)
            .and_then(|text| engine_text_tokens(client, kind, &text).ok())
            .unwrap_or_default();
        let ended = turn.response.is_some_and(ended_by_the_model);
        let prompt = CachedPrompt::new(turn.id, &tokens, &generated, ended, engine.block_size());
        // Not told which replica: modelled as the one the session was on.
        let modelled = replica
            .clone()
            .or_else(|| previous.prompt.as_ref()?.1.clone())
            .unwrap_or_default();
        let cache = self
            .replicas
            .entry(modelled)
            .or_insert_with(|| engine.cache(size));
        let predicted = cache.serve(&prompt.prompt()).cached as usize;
        self.metrics.predicted(&turn.exchange.upstream, predicted);
        let mut lost_tokens = None;
        if let Some(((previous, previous_replica), reported)) =
            previous.prompt.as_ref().zip(turn.usage)
        {
            // What a replica that served the previous turn alone would serve now, with the
            // tokens generated for it and without.
            let reusable = reusable_after(engine, &previous.prompt(), &prompt);
            if reported.cached_tokens < reusable {
                let cause = loss_cause(ServedTurn {
                    previous_replica: previous_replica.as_deref(),
                    replica: replica.as_deref(),
                    predicted: predicted < reusable,
                    served_the_prompt: reported.cached_tokens
                        >= reusable_after(engine, &previous.without_answer(), &prompt),
                });
                let lost = reusable - reported.cached_tokens;
                self.metrics.lost(&turn.exchange.upstream, cause, lost);
                lost_tokens = Some(lost);
                eprintln!(
                    "kvlint proxy: session {} turn {}: {lost} prompt tokens computed again ({cause}; replica {}, previous turn on {})",
                    turn.session + 1,
                    turn.number,
                    shown(replica.as_deref()),
                    shown(previous_replica.as_deref()),
                );
            }
        }
        previous.prompt = Some((prompt, replica));
        lost_tokens
    }

    /// A hosted API: predicts the turn's cached tokens with the API's cache model over
    /// kvlint's rendering of this turn (`current`) and the previous one, in the API's tokens
    /// (scaled by the prompt tokens it reported), and counts what the session lost when the
    /// API served clearly less: a prompt under the API's minimum, a prefix older than its
    /// TTL, or unknown (another machine, an eviction).
    fn predict_hosted(
        &self,
        previous: &PreviousTurn,
        turn: &Turn<'_>,
        current: &CacheTurn,
        model: &kvlint_core::cache::Engine,
    ) -> Option<usize> {
        let Some(earlier_turn) = previous.cache_turn.as_ref() else {
            self.metrics.predicted(&turn.exchange.upstream, 0);
            return None;
        };
        let common = turn.reused_tokens;
        let earlier = Earlier {
            prompt_tokens: earlier_turn.prompt_tokens,
            common_prompt: common,
            common_sequence: common,
            written: model.writes(earlier_turn),
        };
        let predicted = model.predict(current, &[earlier]).cached;
        // The API's tokenizer is not kvlint's: counts scale by the prompt it reported.
        let rendered_tokens = current.prompt_tokens.max(1) as f64;
        let scale = turn
            .usage
            .and_then(|usage| usage.prompt_tokens)
            .map_or(1.0, |reported| reported as f64 / rendered_tokens);
        let in_api_tokens = |count: usize| (count as f64 * scale).round() as usize;
        self.metrics
            .predicted(&turn.exchange.upstream, in_api_tokens(predicted));
        let reported = turn.usage?;
        let elapsed = previous
            .at
            .map(|at| turn.exchange.received.saturating_duration_since(at));
        let minimum = model.min_cacheable_tokens(current).unwrap_or(0);
        let below_minimum = reported
            .prompt_tokens
            .is_some_and(|prompt| prompt < minimum);
        let (cause, lost) = hosted_loss(HostedTurn {
            predicted: in_api_tokens(predicted),
            shared: in_api_tokens(common),
            reported,
            below_minimum,
            elapsed,
            ttl: model.cache_ttl(turn.request),
        })?;
        self.metrics.lost(&turn.exchange.upstream, cause, lost);
        eprintln!(
            "kvlint proxy: session {} turn {}: about {lost} prompt tokens computed again ({cause}{})",
            turn.session + 1,
            turn.number,
            elapsed.map_or(String::new(), |elapsed| format!(
                "; {} s after the previous turn",
                elapsed.as_secs()
            )),
        );
        // A prompt under the API's minimum is never cached: not a miss the session could
        // have avoided.
        (cause != "below_minimum").then_some(lost)
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

/// A turn served less than its session's previous turn made reusable, as the loss's cause
/// reads it.
struct ServedTurn<'a> {
    /// The replica that served the previous turn and this one (`None`: not known).
    previous_replica: Option<&'a str>,
    replica: Option<&'a str>,
    /// Whether the model of the serving replica's cache predicted the loss.
    predicted: bool,
    /// Whether the engine served all the previous prompt shares with this one, short only
    /// in the tokens generated after it.
    served_the_prompt: bool,
}

/// Why a turn served less than its session's previous turn made reusable: another replica
/// (`locality`); the answer's text, sent back, tokenized to other ids than the engine generated
/// (`answer_retokenized`: a model's answer need not be the tokenizer's own tokenization of its
/// text, and the engine's cache holds the ids it generated); the same replica whose cache
/// moved on (`eviction`); the same one where the model saw no reason (`unknown`); a replica
/// not known could be either of locality and eviction (`locality_or_eviction`).
fn loss_cause(turn: ServedTurn<'_>) -> &'static str {
    match (turn.previous_replica, turn.replica) {
        (Some(before), Some(now)) if before != now => "locality",
        _ if turn.served_the_prompt => "answer_retokenized",
        (Some(_), Some(_)) if turn.predicted => "eviction",
        (Some(_), Some(_)) => "unknown",
        _ => "locality_or_eviction",
    }
}

/// A client for an engine's tokens or metrics, trusting `authorities` for https.
pub(in crate::proxy) fn engine_client(
    url: &str,
    authorities: &[CertificateDer<'static>],
) -> Client {
    let authorities: Vec<&[u8]> = authorities.iter().map(|der| der.as_ref()).collect();
    Client::trusting(url, ENGINE_TIMEOUT, &authorities)
}

/// A replica's name in a log line.
fn shown(replica: Option<&str>) -> String {
    match replica {
        Some(name) => format!("{name:?}"),
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A llama.cpp slot keeps the ids the model generated; the next turn sends the answer's
    /// text back, which the tokenizer may split otherwise. Served the whole prompt and short
    /// in the answer: that, not the replica, is why the tokens were computed again.
    #[test]
    fn an_answer_tokenized_otherwise_is_told_from_the_serving_side() {
        let engine = SimEngine::LlamaCpp { slots: 1, block: 1 };
        let prompt: Vec<u32> = (0..20).collect();
        // Generated as 100, 101, 102, 103; its text tokenizes back as 100, 205, 103.
        let previous = CachedPrompt::new(0, &prompt, &[100, 101, 102, 103], false, 1);
        let mut next = prompt.clone();
        next.extend([100, 205, 103, 7, 8]);
        let now = CachedPrompt::new(1, &next, &[], false, 1);
        // The model reads the previous answer's ids as generated: the prompt and 100 reused.
        assert_eq!(reusable_after(engine, &previous.prompt(), &now), 21);
        assert_eq!(reusable_after(engine, &previous.without_answer(), &now), 20);
        let cause = |served: usize, previous_replica, replica| {
            loss_cause(ServedTurn {
                previous_replica,
                replica,
                predicted: false,
                served_the_prompt: served >= 20,
            })
        };
        assert_eq!(cause(20, Some("a"), Some("a")), "answer_retokenized");
        assert_eq!(cause(20, None, None), "answer_retokenized");
        // Less than the prompt: the serving side's causes, as before.
        assert_eq!(cause(12, Some("a"), Some("a")), "unknown");
        assert_eq!(cause(12, None, None), "locality_or_eviction");
        // Another replica that happened to hold the prompt is still another replica.
        assert_eq!(cause(20, Some("a"), Some("b")), "locality");
    }
}
