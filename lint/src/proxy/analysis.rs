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

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use kvlint_core::cache::{CacheTurn, Earlier, ReportedUsage, reported_usage};
use kvlint_core::diff::RenderedRequest;
use kvlint_core::locate::Unplaced;
use kvlint_core::recording::parse_response;
use kvlint_core::render::{Rendered, Renderer};
use kvlint_core::request::{BodyFormat, Request};
use kvlint_protocol::EngineName;
use kvlint_protocol::key::Carried;
use rustls::pki_types::CertificateDer;
use serde_json::{Value, json};

use super::Exchange;
use super::forward::header;
use super::metrics::Metrics;
use crate::probe::{Client, chat_request, engine_tokens, predicted_cached};

/// Prompts kept per replica to model its cache; older ones count as evicted.
const RECENT_PROMPTS: usize = 64;

/// Sessions whose previous request is kept to check the next against; past this many, the
/// least recently seen is forgotten (its next request starts over), so that memory stays
/// bounded however many sessions pass.
const LIVE_SESSIONS: usize = 1024;

/// A session's record goes on in a new file (`session-0007.2.jsonl`, …) past this size.
const RECORD_PART_BYTES: u64 = 256 << 20;

/// How long the analysis waits for an engine's tokens or metrics.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach the upstreams for their tokens, and what they are when the user said.
pub(super) struct EngineProbe {
    pub(super) kind: Option<EngineName>,
    /// Certificate authorities trusted for https upstreams (`--upstream-ca`).
    pub(super) authorities: Vec<CertificateDer<'static>>,
    /// `false` (`--no-prediction`): no predictions, no requests to the engine.
    pub(super) predict: bool,
}

/// How the analysis tells which replica served a request.
pub(super) enum ReplicaSource {
    /// Several `--upstream`s: the one the proxy sent it to.
    Upstream,
    /// A gateway's response header naming the replica; none (one engine) is one replica.
    Header(String),
    /// The gateway's header when it sends one, else the replica the exchange was found to
    /// be served by through the replicas' metrics (`--replica-metrics`).
    Metrics(String),
}

/// What the analysis knows of an upstream.
enum UpstreamModel {
    /// A self-hosted engine: its tokens and cache model.
    SelfHosted {
        client: Client,
        kind: EngineName,
        model: kvlint_core::cache::Engine,
    },
    /// A hosted API: kvlint's rendering and the API's cache model.
    Hosted(kvlint_core::cache::Engine),
}

/// One session seen through the proxy.
struct Session {
    /// The id the requests carry (a user or session id, or the prefix key), if any.
    key: String,
    previous: Option<(Request, Rendered)>,
    /// When the previous request was received.
    previous_at: Option<Instant>,
    /// The engine's tokens of the previous prompt, and the replica that served it (`None`:
    /// not known).
    previous_prompt: Option<(Vec<u32>, Option<String>)>,
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
    /// Per key (empty for none), the sessions that carry it and are not forgotten.
    by_key: HashMap<String, Vec<usize>>,
    engine_probe: EngineProbe,
    /// Per upstream, set up at its first prompt; `None` inside when it offers no tokens.
    upstreams: HashMap<Arc<str>, Option<Arc<UpstreamModel>>>,
    replica_source: ReplicaSource,
    /// Per replica, the prompts it was sent.
    replicas: HashMap<String, VecDeque<Vec<u32>>>,
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
            by_key: HashMap::new(),
            engine_probe,
            upstreams: HashMap::new(),
            replica_source,
            replicas: HashMap::new(),
            exchanges: 0,
            live: 0,
            record_part_bytes: RECORD_PART_BYTES,
        }
    }

    /// What `upstream` is, found once: the kind given, a hosted API by its host, else a
    /// self-hosted engine detected from its endpoints.
    fn upstream_model(&mut self, upstream: &Arc<str>) -> Option<Arc<UpstreamModel>> {
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
            let index = self.session_for(exchange, &body, &rendered);
            self.exchanges += 1;
            self.sessions[index].last_seen = self.exchanges;
            let accepted = exchange.complete && (200..300).contains(&exchange.status);
            if accepted && self.engine_probe.predict {
                let turn = Turn {
                    exchange,
                    body: &body,
                    request: &request,
                    rendered: &rendered,
                    usage,
                };
                match self.upstream_model(&exchange.upstream).as_deref() {
                    Some(UpstreamModel::SelfHosted {
                        client,
                        kind,
                        model,
                    }) => {
                        self.predict_engine(index, &turn, (client, *kind, model), replica.clone())
                    }
                    Some(UpstreamModel::Hosted(model)) => self.predict_hosted(index, &turn, model),
                    None => {}
                }
            }
            if accepted {
                self.check(index, exchange, request, rendered);
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
            ReplicaSource::Header(name) => Some(named(name).unwrap_or_default()),
            ReplicaSource::Metrics(name) => named(name).or_else(|| exchange.replica.clone()),
        }
    }

    /// The session a request belongs to: among the sessions with the same session key
    /// ([`kvlint_protocol::key::SESSION_KEY`]), the one whose previous request it extends most; a
    /// first turn (one user message, no answer yet) starts a new one.
    fn session_for(&mut self, exchange: &Exchange, body: &Value, rendered: &Rendered) -> usize {
        let headers = super::forward::header_pairs(&exchange.request_headers);
        let key = Carried {
            body: Some(body),
            headers: &headers,
            trace_conversation: None,
        }
        .session_key()
        .unwrap_or_default();
        let continued = (!starts_session(body))
            .then(|| {
                self.by_key
                    .get(&key)?
                    .iter()
                    .filter_map(|&index| {
                        let (_, previous) = self.sessions[index].previous.as_ref()?;
                        let shared = previous.tokens.common_prefix_len(&rendered.tokens);
                        (shared > 0).then_some((shared, index))
                    })
                    .max()
                    .map(|(_, index)| index)
            })
            .flatten();
        continued.unwrap_or_else(|| {
            let index = self.sessions.len();
            self.sessions.push(Session {
                key: key.clone(),
                previous: None,
                previous_at: None,
                previous_prompt: None,
                turns: 0,
                record: None,
                record_bytes: 0,
                record_part: 0,
                last_seen: 0,
            });
            self.by_key.entry(key).or_default().push(index);
            index
        })
    }

    fn check(&mut self, index: usize, exchange: &Exchange, request: Request, rendered: Rendered) {
        let session = &mut self.sessions[index];
        let previous = session
            .previous
            .as_ref()
            .map(|(request, rendered)| RenderedRequest { request, rendered });
        let current = RenderedRequest {
            request: &request,
            rendered: &rendered,
        };
        let (_, finding) = kvlint_rules::check_pair(
            previous,
            current,
            session.turns,
            self.renderer.tokenizer(),
            &Unplaced,
        );
        if let Some(finding) = finding {
            self.metrics.finding(&exchange.upstream, finding.rule);
        }
        if session.previous.is_none() {
            self.live += 1;
        }
        session.previous = Some((request, rendered));
        session.previous_at = Some(exchange.received);
        session.turns += 1;
        self.forget_idle();
    }

    /// Forgets the least recently seen sessions past [`LIVE_SESSIONS`]: their previous request,
    /// tokens and open record file.
    fn forget_idle(&mut self) {
        while self.live > LIVE_SESSIONS {
            let Some((index, oldest)) = self
                .sessions
                .iter_mut()
                .enumerate()
                .filter(|(_, session)| session.previous.is_some())
                .min_by_key(|(_, session)| session.last_seen)
            else {
                return;
            };
            // Its next request starts a new session: it is no longer a candidate.
            if let Some(sessions) = self.by_key.get_mut(&oldest.key) {
                sessions.retain(|candidate| *candidate != index);
            }
            oldest.previous = None;
            oldest.previous_at = None;
            oldest.previous_prompt = None;
            oldest.record = None;
            self.live -= 1;
        }
    }

    /// A self-hosted engine: predicts the turn's cached tokens from the engine's tokens and
    /// what its replica was sent, and counts what the session lost when the engine served
    /// less than the session's previous prompt made reusable.
    fn predict_engine(
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
    fn predict_hosted(
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

    /// Appends the exchange to its session's file as `{request, response}`, what `kvlint
    /// check` reads; the request's headers (keys included) are never written.
    fn record(
        &mut self,
        index: usize,
        body: &Value,
        (response, response_text): (Option<Value>, &str),
        exchange: &Exchange,
        replica: Option<String>,
    ) {
        let Some(folder) = self.record.as_ref() else {
            return;
        };
        let response = response.unwrap_or_else(|| Value::String(response_text.to_owned()));
        let time = chrono::DateTime::<chrono::Utc>::from(exchange.received_at)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut line = json!({"request": body, "response": response, "time": time});
        if let Some(key) = &self.redact {
            line = super::redact::redacted(&line, key);
        }
        if !exchange.complete {
            line["complete"] = Value::Bool(false);
        }
        if !(200..300).contains(&exchange.status) {
            line["status"] = json!(exchange.status);
        }
        if let Some(replica) = replica {
            line["replica"] = json!(replica);
        }
        let line = format!("{line}\n");
        let session = &mut self.sessions[index];
        let full = session.record_bytes > 0
            && session.record_bytes + line.len() as u64 > self.record_part_bytes;
        if session.record.is_none() || full {
            session.record_part += 1;
            session.record_bytes = 0;
            let name = match session.record_part {
                1 => format!("session-{:04}.jsonl", index + 1),
                part => format!("session-{:04}.{part}.jsonl", index + 1),
            };
            let path = folder.join(name);
            session.record = match File::create(&path) {
                Ok(file) => Some(BufWriter::new(file)),
                Err(error) => {
                    eprintln!(
                        "kvlint proxy: cannot record into {}: {error}",
                        path.display()
                    );
                    None
                }
            };
        }
        if let Some(record) = session.record.as_mut() {
            match record
                .write_all(line.as_bytes())
                .and_then(|()| record.flush())
            {
                Ok(()) => session.record_bytes += line.len() as u64,
                Err(error) => eprintln!("kvlint proxy: recording session {}: {error}", index + 1),
            }
        }
    }
}

/// A first turn: one user message and no answer yet.
fn starts_session(body: &Value) -> bool {
    let items = body.get("messages").or_else(|| body.get("input"));
    let Some(items) = items.and_then(Value::as_array) else {
        return items.is_some_and(Value::is_string);
    };
    let roles: Vec<&str> = items
        .iter()
        .map(|item| {
            item.get("role")
                .or_else(|| item.get("type"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        })
        .collect();
    let users = roles.iter().filter(|role| **role == "user").count();
    let answers = roles
        .iter()
        .filter(|role| !matches!(**role, "system" | "developer" | "user"))
        .count();
    users == 1 && answers == 0
}

/// One accepted turn, as the predictions read it.
struct Turn<'a> {
    exchange: &'a Exchange,
    body: &'a Value,
    request: &'a Request,
    rendered: &'a Rendered,
    usage: Option<ReportedUsage>,
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
pub(super) fn engine_client(url: &str, authorities: &[CertificateDer<'static>]) -> Client {
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

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderMap;

    /// An analysis of traffic to a hosted API (no engine to ask for tokens).
    fn hosted_analysis(record: Option<PathBuf>) -> Analysis {
        let metrics = Arc::new(Metrics::new(&[Arc::from(UPSTREAM)]));
        let probe = EngineProbe {
            kind: Some(EngineName::OpenAi),
            authorities: Vec::new(),
            predict: true,
        };
        let replicas = ReplicaSource::Header("x-kvlint-replica".into());
        Analysis::new(metrics, record, false, probe, replicas)
    }

    const UPSTREAM: &str = "https://api.openai.com";

    fn first_turn(session: usize) -> Exchange {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": format!("Task number {session}.")}]});
        Exchange {
            upstream: Arc::from(UPSTREAM),
            received: Instant::now(),
            received_at: std::time::SystemTime::now(),
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            request_headers: HeaderMap::new(),
            request: body.to_string().into(),
            status: 200,
            response_headers: HeaderMap::new(),
            response: br#"{"usage": {"prompt_tokens": 20, "prompt_tokens_details": {"cached_tokens": 0}}}"#.to_vec(),
            complete: true,
            replica: None,
        }
    }

    #[test]
    fn memory_stays_bounded_however_many_sessions_pass() {
        let mut analysis = hosted_analysis(None);
        let sessions = LIVE_SESSIONS + 100;
        for session in 0..sessions {
            analysis.observe(&first_turn(session));
        }
        assert_eq!(analysis.sessions.len(), sessions);
        let kept: Vec<usize> = (0..sessions)
            .filter(|index| analysis.sessions[*index].previous.is_some())
            .collect();
        // The most recent ones are kept, the oldest forgotten.
        assert_eq!(kept.len(), LIVE_SESSIONS);
        assert_eq!(kept[0], 100);
        assert_eq!(analysis.live, LIVE_SESSIONS);
        // A request looks among the sessions still kept only.
        assert_eq!(analysis.by_key[""].len(), LIVE_SESSIONS);
    }

    #[test]
    fn a_long_record_goes_on_in_numbered_parts() {
        let folder =
            std::env::temp_dir().join(format!("kvlint-proxy-parts-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let mut analysis = hosted_analysis(Some(folder.clone()));
        analysis.record_part_bytes = 600;
        // One session growing turn by turn: each line is longer than the one before.
        let mut messages = vec![json!({"role": "user", "content": "Fix the test."})];
        for turn in 0..6 {
            let mut exchange = first_turn(0);
            exchange.request = json!({"model": "m", "messages": messages})
                .to_string()
                .into();
            analysis.observe(&exchange);
            messages.push(json!({"role": "assistant", "content": format!("Step {turn} done.")}));
            messages.push(json!({"role": "user", "content": "Go on."}));
        }
        drop(analysis);
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(names.len() > 1, "{names:?}");
        assert_eq!(names[0], "session-0001.2.jsonl");
        assert_eq!(names.last().unwrap(), "session-0001.jsonl");
        let lines: usize = names
            .iter()
            .map(|name| {
                std::fs::read_to_string(folder.join(name))
                    .unwrap()
                    .lines()
                    .count()
            })
            .sum();
        assert_eq!(lines, 6);
        std::fs::remove_dir_all(&folder).ok();
    }

    /// A turn of a hosted session: `history` user and assistant messages after a long system
    /// prompt, received `at`, answered with `usage`.
    fn hosted_turn(upstream: &str, at: Instant, history: usize, usage: Value) -> Exchange {
        let anthropic = upstream.contains("anthropic");
        let rules = "Answer in the style of the project's changelog, one line per change. "
            .repeat(if history == usize::MAX { 1 } else { 100 });
        let history = history.min(8);
        let mut messages = vec![json!({"role": "user", "content": "Start."})];
        for step in 0..history {
            messages.push(json!({"role": "assistant", "content": format!("Step {step} done.")}));
            messages.push(json!({"role": "user", "content": format!("Now step {}.", step + 1)}));
        }
        let body = if anthropic {
            json!({"model": "claude-sonnet-4-5", "max_tokens": 64,
                "system": [{"type": "text", "text": rules, "cache_control": {"type": "ephemeral"}}],
                "messages": messages})
        } else {
            let mut all = vec![json!({"role": "system", "content": rules})];
            all.extend(messages);
            json!({"model": "gpt-4o", "messages": all})
        };
        let mut exchange = first_turn(0);
        exchange.upstream = Arc::from(upstream);
        exchange.received = at;
        exchange.path = if anthropic {
            "/v1/messages"
        } else {
            "/v1/chat/completions"
        }
        .into();
        exchange.request = body.to_string().into();
        exchange.response = json!({"usage": usage}).to_string().into_bytes();
        exchange
    }

    fn lost(analysis: &Analysis, upstream: &str, cause: &str) -> u64 {
        let text = analysis.metrics.encode();
        let series = format!(
            "kvlint_prompt_tokens_lost_total{{upstream=\"{upstream}\",cause=\"{cause}\"}} "
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {text}"))
    }

    fn hosted(upstream: &str, kind: EngineName) -> Analysis {
        let metrics = Arc::new(Metrics::new(&[Arc::from(upstream)]));
        let probe = EngineProbe {
            kind: Some(kind),
            authorities: Vec::new(),
            predict: true,
        };
        Analysis::new(
            metrics,
            None,
            false,
            probe,
            ReplicaSource::Header("x".into()),
        )
    }

    const OPENAI: &str = "https://api.openai.com";
    const ANTHROPIC: &str = "https://api.anthropic.com";

    fn openai_usage(prompt: u64, cached: u64) -> Value {
        json!({"prompt_tokens": prompt, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": cached}})
    }

    #[test]
    fn a_hosted_turn_computed_again_after_the_ttl_is_an_expiry() {
        let start = Instant::now();
        let minutes = |count: u64| start + Duration::from_secs(count * 60);
        let mut analysis = hosted(OPENAI, EngineName::OpenAi);
        analysis.observe(&hosted_turn(OPENAI, start, 0, openai_usage(1400, 0)));
        // Served as predicted a minute later: no loss.
        analysis.observe(&hosted_turn(
            OPENAI,
            minutes(1),
            1,
            openai_usage(1420, 1280),
        ));
        assert_eq!(
            lost(&analysis, OPENAI, "ttl") + lost(&analysis, OPENAI, "unknown"),
            0
        );
        // Twenty minutes later, nothing served: the in-memory cache let it go.
        analysis.observe(&hosted_turn(OPENAI, minutes(21), 2, openai_usage(1440, 0)));
        let expired = lost(&analysis, OPENAI, "ttl");
        assert!(expired >= 1024, "{expired}");
        assert_eq!(lost(&analysis, OPENAI, "unknown"), 0);
        // A minute after that, nothing served again: not the TTL.
        analysis.observe(&hosted_turn(OPENAI, minutes(22), 3, openai_usage(1460, 0)));
        assert!(lost(&analysis, OPENAI, "unknown") >= 1024);
        assert_eq!(lost(&analysis, OPENAI, "ttl"), expired);
    }

    #[test]
    fn a_hosted_prompt_under_the_minimum_is_said_so_not_lost() {
        let start = Instant::now();
        let mut analysis = hosted(OPENAI, EngineName::OpenAi);
        // One line of rules: far under OpenAI's 1,024 tokens.
        analysis.observe(&hosted_turn(OPENAI, start, usize::MAX, openai_usage(40, 0)));
        let mut second = hosted_turn(OPENAI, start, usize::MAX, openai_usage(52, 0));
        let mut body: Value = serde_json::from_slice(&second.request).unwrap();
        body["messages"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": "Done."}),
            json!({"role": "user", "content": "More."}),
        ]);
        second.request = body.to_string().into();
        analysis.observe(&second);
        assert!(lost(&analysis, OPENAI, "below_minimum") > 0);
        assert_eq!(
            lost(&analysis, OPENAI, "unknown") + lost(&analysis, OPENAI, "ttl"),
            0
        );
    }

    #[test]
    fn an_anthropic_breakpoint_asking_an_hour_is_not_expired_after_ten_minutes() {
        let start = Instant::now();
        let usage = |read: u64, written: u64| {
            json!({"input_tokens": 12, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written, "output_tokens": 5})
        };
        for (ttl, cause) in [(None, "ttl"), (Some("1h"), "unknown")] {
            let mut analysis = hosted(ANTHROPIC, EngineName::Anthropic);
            let mut turns = [
                hosted_turn(ANTHROPIC, start, 0, usage(0, 1400)),
                hosted_turn(
                    ANTHROPIC,
                    start + Duration::from_secs(600),
                    1,
                    usage(0, 1420),
                ),
            ];
            if let Some(ttl) = ttl {
                for turn in &mut turns {
                    let mut body: Value = serde_json::from_slice(&turn.request).unwrap();
                    body["system"][0]["cache_control"]["ttl"] = json!(ttl);
                    turn.request = body.to_string().into();
                }
            }
            for turn in &turns {
                analysis.observe(turn);
            }
            assert!(lost(&analysis, ANTHROPIC, cause) > 1000, "{ttl:?}");
            let other = if cause == "ttl" { "unknown" } else { "ttl" };
            assert_eq!(lost(&analysis, ANTHROPIC, other), 0, "{ttl:?}");
        }
    }
}
