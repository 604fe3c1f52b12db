//! `kvlint probe`: replays a session against a live OpenAI-compatible engine and compares
//! what the engine reports as served from cache with kvlint's prediction, turn by turn.
//!
//! Each turn is sent with `max_tokens: 1`, `temperature: 0` and no streaming. The prediction
//! uses the engine's own tokens where the engine offers them: llama.cpp's `/apply-template`
//! then `/tokenize` (`add_special`, `parse_special`), vLLM's and SGLang's `/tokenize` with
//! messages and tools.

use std::time::Duration;

use kvlint_core::cache::{llamacpp_hit, sglang_hit, vllm_hit};
use kvlint_core::render::{Renderer, chat_view};
use kvlint_core::request::BodyFormat;
use kvlint_core::session::SessionFile;
use serde::Serialize;
use serde_json::{Value, json};

/// The kind of server, which decides the endpoints and fields read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Llamacpp,
    Vllm,
    Sglang,
    /// OpenAI's API: `usage.prompt_tokens_details.cached_tokens`; no tokenize endpoint.
    Openai,
    /// Anthropic's Messages API: `usage.cache_read_input_tokens`; no tokenize endpoint.
    Anthropic,
}

/// One turn of a probe.
#[derive(Debug, Serialize)]
pub struct ProbeTurn {
    pub index: usize,
    /// Prompt tokens as the engine tokenizes the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_cached_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_cached_tokens: Option<usize>,
    #[serde(rename = "match")]
    pub matches: bool,
    /// Whether kvlint's own rendering (engine mode) gives the engine's tokens, when a chat
    /// template and tokenizer were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_rendering_matches: Option<bool>,
    /// With `--gateway`: the replica (index into `--replica`) that served the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<usize>,
    /// With `--gateway`: tokens a replica that held the session's prefix would have served
    /// but the serving replica recomputed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_locality_tokens: Option<usize>,
    /// What went wrong or why prediction and observation differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ProbeSession {
    pub path: String,
    pub engine_url: String,
    pub engine_kind: EngineKind,
    /// With `--gateway`: the routing key sent in the `x-kvlint-routing-key` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    pub turns: Vec<ProbeTurn>,
}

#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub version: u32,
    pub sessions: Vec<ProbeSession>,
    pub errors: Vec<crate::report::ErrorReport>,
}

impl ProbeReport {
    /// Every turn answered and observed.
    pub fn complete(&self) -> bool {
        self.errors.is_empty()
            && self
                .sessions
                .iter()
                .flat_map(|session| &session.turns)
                .all(|turn| {
                    turn.observed_cached_tokens.is_some() && turn.predicted_cached_tokens.is_some()
                })
    }

    pub fn all_match(&self) -> bool {
        self.sessions
            .iter()
            .flat_map(|session| &session.turns)
            .all(|turn| turn.matches)
    }
}

/// Replicas behind a gateway: each is probed directly to learn which one served a turn.
pub struct Fleet {
    pub gateway: Client,
    pub replicas: Vec<Client>,
    /// Each replica's slot: the last sequence it processed (llama.cpp, one slot each).
    slots: Vec<Vec<u32>>,
}

impl Fleet {
    pub fn new(gateway: Client, replicas: Vec<Client>) -> Self {
        let slots = vec![Vec::new(); replicas.len()];
        Self {
            gateway,
            replicas,
            slots,
        }
    }

    /// Tokens each replica has generated so far (`llamacpp:tokens_predicted_total`): the one
    /// that grows served the turn.
    fn predicted_totals(&self) -> Vec<Option<f64>> {
        self.replicas
            .iter()
            .map(|replica| {
                prometheus_value(
                    &replica.get_text("/metrics")?,
                    "llamacpp:tokens_predicted_total",
                )
            })
            .collect()
    }
}

/// The value of the first sample of `metric` in Prometheus text.
pub fn prometheus_value(text: &str, metric: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find(|line| line.split([' ', '{']).next() == Some(metric))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// Sends a turn's chat request and reads what the engine served from cache; a failure goes
/// into the turn's note.
fn observe(
    client: &Client,
    kind: EngineKind,
    body: &Value,
    headers: &[(&str, &str)],
    note: &mut Option<String>,
) -> Option<usize> {
    let answer = client
        .post_with("/v1/chat/completions", body, headers)
        .map_err(|failure| failure.0)
        .and_then(|response| observed_cached(kind, &response));
    answer.map_err(|problem| *note = Some(problem)).ok()
}

impl ProbeTurn {
    /// A turn's result; a turn without a note whose numbers differ gets the explanation.
    fn new(
        index: usize,
        tokens: Option<&Vec<u32>>,
        predicted: Option<usize>,
        observed: Option<usize>,
        note: Option<String>,
    ) -> Self {
        let matches = predicted.is_some() && predicted == observed;
        Self {
            index,
            prompt_tokens: tokens.map(Vec::len),
            predicted_cached_tokens: predicted,
            observed_cached_tokens: observed,
            matches,
            own_rendering_matches: None,
            replica: None,
            lost_locality_tokens: None,
            note: note.or_else(|| (!matches).then(|| explain_mismatch(predicted, observed, None))),
        }
    }
}

/// A problem talking to the engine, said per turn.
#[derive(Debug)]
struct Failure(String);

/// The HTTP side of a probe.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    api_key: Option<String>,
}

/// Attempts for a 429 answer with `retry-after`, and the longest wait honoured.
const RATE_LIMIT_ATTEMPTS: usize = 3;
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(10);

impl Client {
    pub fn new(base: &str, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            agent,
            base: base.trim_end_matches('/').to_owned(),
            // Keys come only from the environment and are never printed or written.
            api_key: std::env::var("KVLINT_API_KEY")
                .or_else(|_| std::env::var("OPENAI_API_KEY"))
                .ok(),
        }
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        self.post_with(path, body, &[])
    }

    fn post_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Result<Value, Failure> {
        for attempt in 1..=RATE_LIMIT_ATTEMPTS {
            let mut request = self.agent.post(&format!("{}{path}", self.base));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some(key) = &self.api_key {
                request = request.header("authorization", &format!("Bearer {key}"));
            }
            let mut response = request
                .send_json(body)
                .map_err(|error| Failure(describe_transport(&error)))?;
            let status = response.status().as_u16();
            if status == 429 && attempt < RATE_LIMIT_ATTEMPTS {
                let wait = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.trim().parse::<u64>().ok())
                    .map_or(Duration::from_secs(1), Duration::from_secs)
                    .min(LONGEST_RETRY_AFTER);
                std::thread::sleep(wait);
                continue;
            }
            let text = response.body_mut().read_to_string().map_err(|error| {
                Failure(format!(
                    "{path}: the response body could not be read: {error}"
                ))
            })?;
            if !(200..300).contains(&status) {
                let excerpt: String = text.chars().take(200).collect();
                return Err(Failure(format!("{path}: HTTP {status}: {excerpt}")));
            }
            return serde_json::from_str(&text).map_err(|error| {
                Failure(format!("{path}: malformed JSON in the response: {error}"))
            });
        }
        Err(Failure(format!(
            "{path}: still rate limited (HTTP 429) after {RATE_LIMIT_ATTEMPTS} attempts"
        )))
    }

    fn get_text(&self, path: &str) -> Option<String> {
        let mut response = self
            .agent
            .get(&format!("{}{path}", self.base))
            .call()
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        response.body_mut().read_to_string().ok()
    }

    /// Guesses the engine from the endpoints it answers.
    pub fn detect(&self) -> EngineKind {
        let metrics = self.get_text("/metrics").unwrap_or_default();
        if metrics.contains("vllm:") {
            EngineKind::Vllm
        } else if metrics.contains("sglang:") {
            EngineKind::Sglang
        } else {
            EngineKind::Llamacpp
        }
    }

    /// llama.cpp's `llamacpp:prompt_tokens_cached_total` (needs `--metrics` on the server).
    fn cached_total(&self) -> Option<f64> {
        prometheus_value(
            &self.get_text("/metrics")?,
            "llamacpp:prompt_tokens_cached_total",
        )
    }

    /// How many slots a llama.cpp server has (`/slots`).
    fn slot_count(&self) -> Option<usize> {
        let slots: Value = serde_json::from_str(&self.get_text("/slots")?).ok()?;
        slots.as_array().map(Vec::len)
    }

    /// The model the server serves (`/v1/models`): vLLM and SGLang reject other names.
    pub fn served_model(&self) -> Option<String> {
        let models: Value = serde_json::from_str(&self.get_text("/v1/models")?).ok()?;
        models.pointer("/data/0/id")?.as_str().map(str::to_owned)
    }

    /// vLLM's block size, from the `vllm:cache_config_info` gauge.
    fn vllm_block_size(&self) -> usize {
        let metrics = self.get_text("/metrics").unwrap_or_default();
        prometheus_label(&metrics, "vllm:cache_config_info", "block_size")
            .and_then(|value| value.parse().ok())
            .unwrap_or(16)
    }
}

fn describe_transport(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "the engine did not answer in time".to_owned(),
        ureq::Error::ConnectionFailed | ureq::Error::Io(_) => {
            format!("cannot reach the engine: {error}")
        }
        other => format!("request failed: {other}"),
    }
}

/// The value of `label` on the first sample of `metric` in Prometheus text. Metric names
/// with colons (`vllm:*`) are kept, unlike some parsers do.
pub fn prometheus_label(text: &str, metric: &str, label: &str) -> Option<String> {
    let line = text.lines().find(|line| {
        !line.starts_with('#') && line.starts_with(metric) && line[metric.len()..].starts_with('{')
    })?;
    let labels = &line[line.find('{')? + 1..line.find('}')?];
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key.trim() == label).then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// The cached prompt tokens an engine reports in a chat completion response.
pub fn observed_cached(kind: EngineKind, response: &Value) -> Result<usize, String> {
    let details = response
        .pointer("/usage/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64);
    let timings = response.pointer("/timings/cache_n").and_then(Value::as_u64);
    let responses = response
        .pointer("/usage/input_tokens_details/cached_tokens")
        .and_then(Value::as_u64);
    let anthropic = response
        .pointer("/usage/cache_read_input_tokens")
        .and_then(Value::as_u64);
    let value = match kind {
        EngineKind::Llamacpp => timings.or(details),
        EngineKind::Vllm | EngineKind::Sglang => details,
        EngineKind::Openai => details.or(responses),
        EngineKind::Anthropic => anthropic,
    };
    value.map(|value| value as usize).ok_or_else(|| match kind {
        EngineKind::Openai => "the response has no `usage.prompt_tokens_details.cached_tokens`".to_owned(),
        EngineKind::Anthropic => "the response has no `usage.cache_read_input_tokens`".to_owned(),
        EngineKind::Llamacpp => "the response has neither `timings.cache_n` nor `usage.prompt_tokens_details.cached_tokens`".to_owned(),
        EngineKind::Vllm => "`usage.prompt_tokens_details` is null: start vLLM with --enable-prompt-tokens-details".to_owned(),
        EngineKind::Sglang => "`usage.prompt_tokens_details` is null: start SGLang with --enable-cache-report".to_owned(),
    })
}

/// Replays one session against a hosted API, which offers no tokenizer: the prediction is
/// kvlint's cache model for that API on its own rendering (approximate, as the report says).
pub fn probe_hosted(
    client: &Client,
    kind: EngineKind,
    session: &SessionFile,
    model: Option<&str>,
) -> ProbeSession {
    let engine = match kind {
        EngineKind::Anthropic => kvlint_core::cache::Engine::Anthropic {
            model: model.map(str::to_owned),
        },
        _ => kvlint_core::cache::Engine::OpenAi {
            model: model.map(str::to_owned),
        },
    };
    let renderer = Renderer::provider();
    let predictions = kvlint_rules::check_session(session, &renderer, Some(&engine))
        .ok()
        .and_then(|checked| checked.predictions)
        .unwrap_or_default();
    let anthropic_key = std::env::var("ANTHROPIC_API_KEY").ok();
    let mut turns = Vec::new();
    for (index, turn) in session.turns.iter().enumerate() {
        let mut note = None;
        let (path, body, headers) = if kind == EngineKind::Anthropic {
            let mut body = turn.request.body.clone();
            body["max_tokens"] = json!(1);
            body["stream"] = json!(false);
            if let Some(model) = model {
                body["model"] = json!(model);
            }
            let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
            headers.extend(anthropic_key.clone().map(|key| ("x-api-key", key)));
            ("/v1/messages", body, headers)
        } else {
            let mut body = chat_body(turn, model);
            if let Some(key) = turn.request.body.get("prompt_cache_key") {
                body["prompt_cache_key"] = key.clone();
            }
            ("/v1/chat/completions", body, Vec::new())
        };
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let observed = client
            .post_with(path, &body, &headers)
            .map_err(|failure| failure.0)
            .and_then(|response| observed_cached(kind, &response))
            .map_err(|problem| note = Some(problem))
            .ok();
        let prediction = predictions.get(index);
        let predicted = prediction.map(|prediction| prediction.recorded.cached);
        turns.push(ProbeTurn {
            prompt_tokens: prediction.map(|prediction| prediction.prompt_tokens),
            ..ProbeTurn::new(index, None, predicted, observed, note)
        });
    }
    ProbeSession {
        path: session.path.clone(),
        engine_url: client.base.clone(),
        engine_kind: kind,
        routing_key: None,
        turns,
    }
}

/// Replays one session. `seen` holds the token sequences the engine already processed in
/// this run, oldest first: its cache (llama.cpp's slot, vLLM's and SGLang's prefix cache)
/// spans sessions.
pub fn probe_session(
    client: &Client,
    kind: EngineKind,
    session: &SessionFile,
    model: Option<&str>,
    own_renderer: Option<&Renderer>,
    seen: &mut Vec<Vec<u32>>,
    from_metrics: bool,
) -> ProbeSession {
    // llama.cpp: more than one slot makes "the previous request" ambiguous.
    let slots = (kind == EngineKind::Llamacpp)
        .then(|| client.slot_count())
        .flatten();
    let block = if kind == EngineKind::Vllm {
        client.vllm_block_size()
    } else {
        16
    };
    let previous_tokens = seen;
    let mut turns = Vec::new();
    for (index, turn) in session.turns.iter().enumerate() {
        let body = chat_body(turn, model);
        let mut note = None;
        let tokens = engine_tokens(client, kind, &body)
            .map_err(|failure| note = Some(failure.0))
            .ok();
        let own_rendering_matches = own_renderer.zip(tokens.as_ref()).map(|(renderer, tokens)| {
            renderer
                .render(&turn.request)
                .map(|rendered| rendered.tokens.ids() == *tokens)
                .unwrap_or(false)
        });
        let predicted = tokens.as_ref().map(|tokens| {
            let n = tokens.len();
            let common = |earlier: &Vec<u32>| {
                earlier
                    .iter()
                    .zip(tokens)
                    .take_while(|(a, b)| a == b)
                    .count()
            };
            match kind {
                // One slot: the previous request's tokens.
                EngineKind::Llamacpp => llamacpp_hit(n, previous_tokens.last().map_or(0, common)),
                EngineKind::Vllm => vllm_hit(
                    n,
                    previous_tokens.iter().map(common).max().unwrap_or(0),
                    block,
                    false,
                ),
                // Hosted APIs are probed by `probe_hosted`; a page of one token otherwise.
                EngineKind::Sglang | EngineKind::Openai | EngineKind::Anthropic => {
                    sglang_hit(n, previous_tokens.iter().map(common).max().unwrap_or(0), 1)
                }
            }
        });
        let before = from_metrics.then(|| client.cached_total()).flatten();
        let mut observed = observe(client, kind, &body, &[], &mut note);
        if from_metrics {
            // The server's own counter, read around the request.
            let after = client.cached_total();
            match before.zip(after) {
                Some((before, after)) => {
                    let counted = (after - before).max(0.0) as usize;
                    if observed.is_some_and(|observed| observed != counted) {
                        note = Some(format!("the response says {observed:?} cached, /metrics counted {counted}"));
                    }
                    observed = Some(counted);
                }
                None => note = Some("/metrics has no llamacpp:prompt_tokens_cached_total: start llama-server with --metrics".into()),
            }
        }
        if note.is_none() && predicted != observed && slots.is_some_and(|slots| slots > 1) {
            note = Some(format!(
                "the server has {} slots (/slots): the turn may have gone to a slot holding another prefix; run it with -np 1 or pin id_slot",
                slots.unwrap_or_default()
            ));
        }
        if own_rendering_matches == Some(false) && note.is_none() {
            note = Some(explain_mismatch(predicted, observed, own_rendering_matches));
        }
        turns.push(ProbeTurn {
            own_rendering_matches,
            ..ProbeTurn::new(index, tokens.as_ref(), predicted, observed, note)
        });
        if let Some(tokens) = tokens {
            previous_tokens.push(tokens);
        }
    }
    ProbeSession {
        path: session.path.clone(),
        engine_url: client.base.clone(),
        engine_kind: kind,
        routing_key: None,
        turns,
    }
}

/// The header kvlint's SDK routes sessions by; a gateway can hash on it.
pub const ROUTING_KEY_HEADER: &str = "x-kvlint-routing-key";

/// The routing key of a session: its requests' `prompt_cache_key` (the SDK sets it), else a
/// hash of the first request's tools and first message.
fn routing_key(session: &SessionFile) -> String {
    let first = session.turns.first().map(|turn| &turn.request);
    if let Some(key) = first
        .and_then(|request| request.body.get("prompt_cache_key"))
        .and_then(Value::as_str)
    {
        return key.to_owned();
    }
    let mut hasher = blake3::Hasher::new();
    for part in first
        .map(|request| request.parts.as_slice())
        .unwrap_or_default()
        .iter()
        .take_while(|part| part.message.is_none_or(|message| message == 0))
    {
        hasher.update(part.text.as_bytes());
    }
    hasher.finalize().to_hex()[..32].to_owned()
}

/// Replays a session through a gateway and finds, per turn, which replica served it and
/// whether that replica held the prefix.
pub fn probe_fleet(fleet: &mut Fleet, session: &SessionFile, model: Option<&str>) -> ProbeSession {
    let key = routing_key(session);
    let mut previous: Option<Vec<u32>> = None;
    let mut turns = Vec::new();
    for (index, turn) in session.turns.iter().enumerate() {
        let body = chat_body(turn, model);
        let mut note = None;
        let Some(tokenizer) = fleet.replicas.first() else {
            break;
        };
        let tokens = engine_tokens(tokenizer, EngineKind::Llamacpp, &body)
            .map_err(|failure| note = Some(failure.0))
            .ok();
        let before = fleet.predicted_totals();
        let observed = observe(
            &fleet.gateway,
            EngineKind::Llamacpp,
            &body,
            &[(ROUTING_KEY_HEADER, &key)],
            &mut note,
        );
        let after = fleet.predicted_totals();
        let replica = before
            .iter()
            .zip(&after)
            .position(|(before, after)| matches!((before, after), (Some(b), Some(a)) if a > b));
        let common = |earlier: &[u32], tokens: &[u32]| {
            earlier
                .iter()
                .zip(tokens)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let (predicted, lost) = match (&tokens, replica) {
            (Some(tokens), Some(replica)) => {
                let n = tokens.len();
                let served = llamacpp_hit(n, common(&fleet.slots[replica], tokens));
                // A route that sent the turn where the session's previous turn went.
                let sticky = previous
                    .as_deref()
                    .map_or(0, |previous| llamacpp_hit(n, common(previous, tokens)));
                fleet.slots[replica].clone_from(tokens);
                (Some(served), Some(sticky.saturating_sub(served)))
            }
            _ => (None, None),
        };
        if note.is_none() && replica.is_none() {
            note = Some("no replica's metrics moved: cannot tell which one served the turn (start replicas with --metrics)".into());
        }
        if let (Some(lost), Some(replica), None) = (lost, replica, &note)
            && lost > 0
        {
            note = Some(format!(
                "turn {index} went to replica {replica}, which had not seen the prefix: {lost} tokens recomputed; a prefix-aware or sticky route (hash on the {ROUTING_KEY_HEADER} header) would have served them"
            ));
        }
        turns.push(ProbeTurn {
            replica,
            lost_locality_tokens: lost,
            ..ProbeTurn::new(index, tokens.as_ref(), predicted, observed, note)
        });
        previous = tokens;
    }
    ProbeSession {
        path: session.path.clone(),
        engine_url: fleet.gateway.base.clone(),
        engine_kind: EngineKind::Llamacpp,
        routing_key: Some(key),
        turns,
    }
}

/// A turn's request as a chat completion with one generated token: an OpenAI chat body as
/// recorded, other APIs converted (tool-call arguments as JSON strings, as the API takes them).
fn chat_body(turn: &kvlint_core::session::Turn, model: Option<&str>) -> Value {
    let (messages, tools): (Vec<Value>, Option<Vec<Value>>) = match turn.request.format {
        BodyFormat::OpenAiChat => (
            turn.request
                .messages
                .iter()
                .map(|message| message.value.clone())
                .collect(),
            turn.request
                .body
                .get("tools")
                .and_then(Value::as_array)
                .cloned(),
        ),
        _ => {
            let (messages, tools) = chat_view(&turn.request);
            let mut messages: Vec<Value> = messages
                .into_iter()
                .map(|message| message.into_owned())
                .collect();
            for call in messages
                .iter_mut()
                .filter_map(|message| message.get_mut("tool_calls"))
                .filter_map(Value::as_array_mut)
                .flatten()
            {
                if let Some(arguments) = call
                    .pointer_mut("/function/arguments")
                    .filter(|arguments| !arguments.is_string())
                {
                    *arguments = Value::String(arguments.to_string());
                }
            }
            (
                messages,
                tools.map(|tools| tools.into_iter().map(|tool| tool.into_owned()).collect()),
            )
        }
    };
    let mut body =
        json!({"messages": messages, "max_tokens": 1, "temperature": 0, "stream": false});
    if let Some(tools) = &tools {
        body["tools"] = json!(tools);
    }
    if let Some(model) = model.or(turn.request.model.as_deref()) {
        body["model"] = json!(model);
    }
    body
}

fn explain_mismatch(
    predicted: Option<usize>,
    observed: Option<usize>,
    own_rendering_matches: Option<bool>,
) -> String {
    match (predicted, observed, own_rendering_matches) {
        (_, _, Some(false)) => "kvlint's rendering differs from the engine's tokens: the template or tokenizer is not the engine's".into(),
        (Some(predicted), Some(observed), _) if observed < predicted => format!(
            "the engine served {observed} of the {predicted} tokens it held: the cache was evicted, another slot was used, or the request went to a replica that never saw the prefix"
        ),
        (Some(predicted), Some(observed), _) => format!(
            "the engine served {observed}, more than the {predicted} predicted: it kept a prefix from another request (another session in the same slot or cache)"
        ),
        _ => "no prediction or no observation for this turn".into(),
    }
}

/// The prompt tokens the engine computes for a chat request.
fn engine_tokens(client: &Client, kind: EngineKind, body: &Value) -> Result<Vec<u32>, Failure> {
    let response = match kind {
        EngineKind::Llamacpp => {
            let prompt = client.post("/apply-template", body)?;
            let prompt = prompt
                .get("prompt")
                .and_then(Value::as_str)
                .ok_or_else(|| Failure("/apply-template: no `prompt` in the response".into()))?;
            client.post(
                "/tokenize",
                &json!({"content": prompt, "add_special": true, "parse_special": true}),
            )?
        }
        EngineKind::Vllm | EngineKind::Sglang | EngineKind::Openai | EngineKind::Anthropic => {
            let mut request = json!({"messages": body["messages"], "add_generation_prompt": true});
            if let Some(tools) = body.get("tools") {
                request["tools"] = tools.clone();
            }
            if let Some(model) = body.get("model") {
                request["model"] = model.clone();
            }
            client.post("/tokenize", &request)?
        }
    };
    response
        .get("tokens")
        .and_then(Value::as_array)
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(|token| token.as_u64().or_else(|| token.get("id")?.as_u64()))
                .map(|id| id as u32)
                .collect()
        })
        .ok_or_else(|| Failure("/tokenize: no `tokens` in the response".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_labels_keep_colon_names() {
        let metrics = "# HELP vllm:cache_config_info info\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"32\",enable_prefix_caching=\"True\"} 1.0\n";
        assert_eq!(
            prometheus_label(metrics, "vllm:cache_config_info", "block_size").as_deref(),
            Some("32")
        );
        assert_eq!(
            prometheus_label(metrics, "vllm:cache_config_info", "missing"),
            None
        );
    }

    #[test]
    fn observed_fields_of_hosted_apis() {
        // Response shapes as the APIs document them.
        let openai = json!({"usage": {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}}});
        assert_eq!(observed_cached(EngineKind::Openai, &openai), Ok(1920));
        let responses = json!({"usage": {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1024}}});
        assert_eq!(observed_cached(EngineKind::Openai, &responses), Ok(1024));
        let anthropic = json!({"usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4500}});
        assert_eq!(observed_cached(EngineKind::Anthropic, &anthropic), Ok(4500));
    }

    #[test]
    fn observed_fields_per_engine() {
        // Recorded response shapes: llama.cpp with timings, vLLM without prompt details.
        let llamacpp =
            json!({"usage": {"prompt_tokens": 60}, "timings": {"cache_n": 47, "prompt_n": 13}});
        assert_eq!(observed_cached(EngineKind::Llamacpp, &llamacpp), Ok(47));
        let vllm = json!({"usage": {"prompt_tokens": 60, "prompt_tokens_details": null}});
        assert!(
            observed_cached(EngineKind::Vllm, &vllm)
                .unwrap_err()
                .contains("--enable-prompt-tokens-details")
        );
    }
}
