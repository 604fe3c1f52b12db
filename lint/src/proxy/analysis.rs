//! The analysis beside the forwarding path: each exchange, once its response has ended, is
//! put into its session, checked against the session's previous request with the pipeline
//! `kvlint check` runs (`kvlint_rules::check_pair`), counted, and recorded.
//!
//! For a self-hosted engine it also predicts, as `kvlint probe` does, what the engine serves
//! from cache: the engine's own tokens (`/apply-template` and `/tokenize`, or `/tokenize`) and
//! its cache model over what the replica that served the turn was sent. A turn that extends
//! its session's previous prompt but gets less than that prompt made reusable is a loss, with
//! its cause: another replica served it (locality), the replica's cache moved on to other
//! requests (eviction), else unknown.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use kvlint_core::cache::reported_usage;
use kvlint_core::diff::RenderedRequest;
use kvlint_core::locate::Unplaced;
use kvlint_core::recording::parse_response;
use kvlint_core::render::{Rendered, Renderer};
use kvlint_core::request::Request;
use serde_json::{Value, json};

use super::Exchange;
use super::forward::header;
use super::metrics::Metrics;
use crate::probe::{Client, EngineKind, engine_tokens, predicted_cached};

/// Prompts kept per replica to model its cache; older ones count as evicted.
const RECENT_PROMPTS: usize = 64;

/// Sessions whose previous request is kept to check the next against; past this many, the
/// least recently seen is forgotten (its next request starts over), so that memory stays
/// bounded however many sessions pass.
const LIVE_SESSIONS: usize = 1024;

/// A session's record goes on in a new file (`session-0007.2.jsonl`, …) past this size.
const RECORD_PART_BYTES: u64 = 256 << 20;

/// How to reach the engine for its tokens, and what it is when the user said.
pub(super) struct EngineProbe {
    pub(super) url: String,
    pub(super) kind: Option<EngineKind>,
}

/// A self-hosted engine: its tokens and cache model.
struct Engine {
    client: Client,
    kind: EngineKind,
    model: kvlint_core::cache::Engine,
}

/// Paths whose POST bodies are prompts: OpenAI chat and Responses, Anthropic Messages.
const PROMPT_PATHS: [&str; 3] = ["/chat/completions", "/responses", "/messages"];

/// One session seen through the proxy.
struct Session {
    /// The id the requests carry (a user or session id, or the prefix key), if any.
    key: String,
    previous: Option<(Request, Rendered)>,
    /// The engine's tokens of the previous prompt, and the replica that served it.
    previous_prompt: Option<(Vec<u32>, String)>,
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
    /// Set up at the first prompt; `None` inside when the engine offers no tokens.
    engine: Option<Option<Engine>>,
    replica_header: String,
    /// Per replica (the gateway's header, empty without one), the prompts it was sent.
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
        replica_header: String,
    ) -> Self {
        Self {
            renderer: Renderer::provider(),
            sessions: Vec::new(),
            metrics,
            record,
            redact: redact.then(std::hash::RandomState::new),
            by_key: HashMap::new(),
            engine_probe,
            engine: None,
            replica_header,
            replicas: HashMap::new(),
            exchanges: 0,
            live: 0,
            record_part_bytes: RECORD_PART_BYTES,
        }
    }

    /// The engine, detected once; hosted APIs offer no tokens.
    fn engine(&mut self) -> Option<&Engine> {
        let probe = &self.engine_probe;
        self.engine
            .get_or_insert_with(|| {
                let client = Client::new(&probe.url, Duration::from_secs(30));
                let kind = probe.kind.unwrap_or_else(|| client.detect());
                let self_hosted = matches!(
                    kind,
                    EngineKind::Llamacpp | EngineKind::Vllm | EngineKind::Sglang
                );
                self_hosted.then(|| Engine {
                    model: client.cache_model(kind, None),
                    client,
                    kind,
                })
            })
            .as_ref()
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
        let is_prompt = exchange.method == "POST"
            && PROMPT_PATHS
                .iter()
                .any(|suffix| exchange.path.trim_end_matches('/').ends_with(suffix));
        let Some(body) = is_prompt
            .then(|| serde_json::from_slice::<Value>(&exchange.request).ok())
            .flatten()
        else {
            return;
        };
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
            if accepted {
                self.check(index, request, rendered);
            }
            self.record(index, &body, response, &response_text, exchange);
            let chat = exchange
                .path
                .trim_end_matches('/')
                .ends_with("/chat/completions");
            if accepted && chat {
                let replica = header(&exchange.response_headers, &self.replica_header)
                    .unwrap_or_default()
                    .to_owned();
                let reported = usage.map(|usage| usage.cached_tokens);
                self.predict(index, &body, replica, reported);
            }
        }
        // Counted last: a scrape that sees the request sees all it changed.
        self.metrics.request(
            usage.and_then(|usage| usage.prompt_tokens),
            usage.map(|usage| usage.cached_tokens),
        );
    }

    /// The session a request belongs to: among the sessions with the same key (a user or
    /// session id, else the prefix key), the one whose previous request it extends most; a
    /// first turn (one user message, no answer yet) starts a new one.
    fn session_for(&mut self, exchange: &Exchange, body: &Value, rendered: &Rendered) -> usize {
        let key = session_key(body, exchange).unwrap_or_default();
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

    fn check(&mut self, index: usize, request: Request, rendered: Rendered) {
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
            self.metrics.finding(finding.rule);
        }
        if session.previous.is_none() {
            self.live += 1;
        }
        session.previous = Some((request, rendered));
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
            oldest.previous_prompt = None;
            oldest.record = None;
            self.live -= 1;
        }
    }

    /// Predicts the turn's cached tokens from the engine's tokens and what its replica was
    /// sent, and counts what the session lost when the engine served less than the session's
    /// previous prompt made reusable.
    fn predict(&mut self, index: usize, body: &Value, replica: String, reported: Option<usize>) {
        let Some(engine) = self.engine() else {
            return;
        };
        let Ok(tokens) = engine_tokens(&engine.client, engine.kind, body) else {
            return;
        };
        let model = engine.model.clone();
        let seen = self.replicas.entry(replica.clone()).or_default();
        let predicted = predicted_cached(&model, &tokens, seen.iter().map(Vec::as_slice));
        self.metrics.predicted(predicted);
        let session = &mut self.sessions[index];
        if let Some(((previous, previous_replica), reported)) =
            session.previous_prompt.as_ref().zip(reported)
        {
            let reusable = predicted_cached(&model, &tokens, [previous.as_slice()]);
            if reported < reusable {
                let cause = if *previous_replica != replica {
                    "locality"
                } else if predicted < reusable {
                    "eviction"
                } else {
                    "unknown"
                };
                let lost = reusable - reported;
                self.metrics.lost(cause, lost);
                eprintln!(
                    "kvlint proxy: session {} turn {}: {lost} prompt tokens computed again ({cause}; replica {replica:?}, previous turn on {previous_replica:?})",
                    index + 1,
                    session.turns.saturating_sub(1),
                );
            }
        }
        seen.push_back(tokens.clone());
        if seen.len() > RECENT_PROMPTS {
            seen.pop_front();
        }
        session.previous_prompt = Some((tokens, replica));
    }

    /// Appends the exchange to its session's file as `{request, response}`, what `kvlint
    /// check` reads; the request's headers (keys included) are never written.
    fn record(
        &mut self,
        index: usize,
        body: &Value,
        response: Option<Value>,
        response_text: &str,
        exchange: &Exchange,
    ) {
        let Some(folder) = self.record.as_ref() else {
            return;
        };
        let response = response.unwrap_or_else(|| Value::String(response_text.to_owned()));
        let mut line = json!({"request": body, "response": response});
        if let Some(key) = &self.redact {
            line = super::redact::redacted(&line, key);
        }
        if !exchange.complete {
            line["complete"] = Value::Bool(false);
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

/// The id that groups a request with its session: a user or session id the body carries
/// (Anthropic's `metadata.user_id`, OpenAI's `user` or `safety_identifier`), else the prefix key
/// (`prompt_cache_key`, or the SDK's routing header).
fn session_key(body: &Value, exchange: &Exchange) -> Option<String> {
    let text = |pointer: &str| {
        body.pointer(pointer)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    text("/metadata/user_id")
        .or_else(|| text("/user"))
        .or_else(|| text("/safety_identifier"))
        .or_else(|| text("/prompt_cache_key"))
        .or_else(|| {
            header(
                &exchange.request_headers,
                kvlint_core::routing::ROUTING_KEY_HEADER,
            )
        })
        .map(str::to_owned)
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

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderMap;

    fn first_turn(session: usize) -> Exchange {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": format!("Task number {session}.")}]});
        Exchange {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            request_headers: HeaderMap::new(),
            request: body.to_string().into(),
            status: 200,
            response_headers: HeaderMap::new(),
            response: br#"{"usage": {"prompt_tokens": 20, "prompt_tokens_details": {"cached_tokens": 0}}}"#.to_vec(),
            complete: true,
        }
    }

    #[test]
    fn memory_stays_bounded_however_many_sessions_pass() {
        let metrics = Arc::new(Metrics::new("http://upstream".into()));
        // A hosted kind: no engine to ask for tokens.
        let probe = EngineProbe {
            url: "http://upstream".into(),
            kind: Some(EngineKind::Openai),
        };
        let mut analysis = Analysis::new(metrics, None, false, probe, "x-kvlint-replica".into());
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
        let metrics = Arc::new(Metrics::new("http://upstream".into()));
        let probe = EngineProbe {
            url: "http://upstream".into(),
            kind: Some(EngineKind::Openai),
        };
        let mut analysis = Analysis::new(metrics, Some(folder.clone()), false, probe, "x".into());
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
}
