use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::HeaderMap;
use serde_json::json;

use super::sessions::LIVE_SESSIONS;
use super::*;

/// An analysis of traffic to a hosted API (no engine to ask for tokens).
fn hosted_analysis(record: Option<PathBuf>) -> Analysis {
    let metrics = Arc::new(Metrics::new(&[Arc::from(UPSTREAM)]));
    let probe = EngineProbe {
        kind: Some(EngineName::OpenAi),
        authorities: Vec::new(),
        predict: true,
        side: None,
    };
    let replicas = ReplicaSource::Header("x-kvlint-replica".into());
    Analysis::new(metrics, record, false, probe, replicas)
}

const UPSTREAM: &str = "https://api.openai.com";

/// The key the sessions keep session `index` of the grouping under (no session key).
fn key(index: usize) -> String {
    format!("#{index}")
}

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
        response:
            br#"{"usage": {"prompt_tokens": 20, "prompt_tokens_details": {"cached_tokens": 0}}}"#
                .to_vec(),
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
    // The most recent ones are kept, the oldest forgotten.
    assert_eq!(analysis.sessions.len(), LIVE_SESSIONS);
    assert!(!analysis.sessions.contains(&key(99)));
    assert_eq!(analysis.sessions.least_recently_used(), Some("#100"));
    // A request looks among the sessions still kept only: the next turn of a forgotten
    // session starts a new one, a kept session's joins it.
    let next_turn = |session: usize| {
        let mut exchange = first_turn(session);
        let mut body: Value = serde_json::from_slice(&exchange.request).unwrap();
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": "Done."}));
        messages.push(json!({"role": "user", "content": "Next."}));
        exchange.request = body.to_string().into();
        exchange
    };
    let turns = |analysis: &Analysis, index: usize| {
        let session = analysis.sessions.guard(&key(index)).unwrap();
        session.guard.counters().turns
    };
    analysis.observe(&next_turn(0));
    assert_eq!(turns(&analysis, sessions), 1);
    // (That new session made the oldest kept one, 100, forgotten in turn.)
    assert!(!analysis.sessions.contains(&key(100)));
    analysis.observe(&next_turn(sessions - 1));
    assert!(!analysis.sessions.contains(&key(sessions + 1)));
    assert_eq!(turns(&analysis, sessions - 1), 2);
    assert_eq!(analysis.sessions.len(), LIVE_SESSIONS);
}

#[test]
fn a_long_record_goes_on_in_numbered_parts() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-parts-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let mut analysis = hosted_analysis(Some(folder.clone()));
    analysis.recorder.part_bytes = 600;
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
    let series =
        format!("kvlint_prompt_tokens_lost_total{{upstream=\"{upstream}\",cause=\"{cause}\"}} ");
    counted(analysis, &series)
}

/// The value of the series whose line starts with `series`.
fn counted(analysis: &Analysis, series: &str) -> u64 {
    let text = analysis.metrics.encode();
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {text}"))
}

fn hosted(upstream: &str, kind: EngineName) -> Analysis {
    let metrics = Arc::new(Metrics::new(&[Arc::from(upstream)]));
    let probe = EngineProbe {
        kind: Some(kind),
        authorities: Vec::new(),
        predict: true,
        side: None,
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

/// A timestamp in the system prompt, new each turn: the application's break, its tokens
/// counted as lost under the rule that names it (in the API's tokens), not only as a finding.
#[test]
fn an_application_break_is_a_loss_with_its_rule_as_the_cause() {
    let start = Instant::now();
    let mut analysis = hosted(OPENAI, EngineName::OpenAi);
    let rules = "Answer in the style of the project's changelog, one line per change. ".repeat(100);
    for (turn, time) in ["2026-12-01T10:00:00Z", "2026-12-01T10:04:31Z"]
        .into_iter()
        .enumerate()
    {
        let mut messages = vec![
            json!({"role": "system", "content": format!("Current time: {time}.\n{rules}")}),
            json!({"role": "user", "content": "Start."}),
        ];
        if turn == 1 {
            messages.push(json!({"role": "assistant", "content": "Started."}));
            messages.push(json!({"role": "user", "content": "Go on."}));
        }
        let mut exchange = hosted_turn(OPENAI, start, 0, openai_usage(1410, 0));
        exchange.request = json!({"model": "gpt-4o", "messages": messages})
            .to_string()
            .into();
        analysis.observe(&exchange);
    }
    let broken = lost(&analysis, OPENAI, "volatile-timestamp");
    // Nearly the whole previous prompt: everything after the time.
    assert!((1300..=1410).contains(&broken), "{broken}");
    let findings =
        "kvlint_findings_total{upstream=\"https://api.openai.com\",rule=\"volatile-timestamp\"} 1";
    assert!(analysis.metrics.encode().contains(findings));
    // The misses split: the break's tokens are avoidable, the rest of the two prompts (sent
    // for the first time) not; in dollars at gpt-4o's input price (no write fee).
    let missed = |kind: &str, name: &str| -> f64 {
        let series = format!("{name}_total{{upstream=\"{OPENAI}\",kind=\"{kind}\"}} ");
        let text = analysis.metrics.encode();
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {text}"))
    };
    let tokens = |kind| missed(kind, "kvlint_prompt_tokens_missed");
    assert_eq!(tokens("avoidable"), broken as f64);
    assert_eq!(tokens("unavoidable"), (2 * 1410 - broken) as f64);
    let price = kvlint_core::cache::MODELS
        .lookup("openai", "gpt-4o")
        .unwrap()
        .input;
    let dollars = |kind| missed(kind, "kvlint_prompt_missed_dollars");
    assert!((dollars("avoidable") - broken as f64 * price / 1e6).abs() < 1e-9);
    assert!((dollars("unavoidable") - (2 * 1410 - broken) as f64 * price / 1e6).abs() < 1e-9);
}

/// A gateway empties a thinking block's text on the way back: the proxy says the signed history
/// came back altered, and counts the refusal kvlint predicts beside the one the API reports.
#[test]
fn signed_history_altered_on_the_way_back_is_caught_and_its_refusal_counted() {
    let mut analysis = hosted(ANTHROPIC, EngineName::Anthropic);
    let question = json!({"role": "user", "content": "Fix the failing test."});
    let answer = json!([
        {"type": "thinking", "thinking": "Read the test first.", "signature": "EqSigA"},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "t.py"}}]);
    let exchange = |messages: Vec<Value>, status: u16, response: Value| {
        let mut exchange = first_turn(0);
        exchange.upstream = Arc::from(ANTHROPIC);
        exchange.path = "/v1/messages".into();
        exchange.request = json!({"model": "claude-opus-5-5", "max_tokens": 256,
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": messages})
        .to_string()
        .into();
        exchange.status = status;
        exchange.response = response.to_string().into_bytes();
        exchange
    };
    analysis.observe(&exchange(
        vec![question.clone()],
        200,
        json!({"type": "message", "content": answer,
            "usage": {"input_tokens": 20, "output_tokens": 30}}),
    ));
    let mut altered = answer.clone();
    altered[0]["thinking"] = json!("");
    let refusal = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}});
    analysis.observe(&exchange(
        vec![
            question,
            json!({"role": "assistant", "content": altered}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def test(): ..."}]}),
        ],
        400,
        refusal,
    ));
    let text = analysis.metrics.encode();
    let count = |series: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(series))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {series} in {text}"))
    };
    let upstream = format!("upstream=\"{ANTHROPIC}\"");
    assert_eq!(
        count(&format!(
            "kvlint_signed_history_changed_total{{{upstream},change=\"altered\"}} "
        )),
        1
    );
    for source in ["predicted", "reported"] {
        let series = format!(
            "kvlint_signed_history_outcomes_total{{{upstream},outcome=\"refused\",source=\"{source}\"}} "
        );
        assert_eq!(count(&series), 1, "{source}");
    }
    assert_eq!(
        count(&format!(
            "kvlint_signed_history_changed_total{{{upstream},change=\"dropped\"}} "
        )),
        0
    );
}

/// The usage the API reported is counted under kvlint's names and under OpenTelemetry's
/// GenAI names: Anthropic's uncached, read and written input tokens add up to the input.
#[test]
fn reported_cache_usage_is_counted_under_opentelemetry_s_names() {
    let start = Instant::now();
    let mut analysis = hosted(ANTHROPIC, EngineName::Anthropic);
    let usage = json!({"input_tokens": 12, "cache_read_input_tokens": 1400,
        "cache_creation_input_tokens": 30, "output_tokens": 5});
    analysis.observe(&hosted_turn(ANTHROPIC, start, 0, usage));
    let series = |name: &str| {
        counted(
            &analysis,
            &format!("{name}_total{{upstream=\"{ANTHROPIC}\"}} "),
        )
    };
    assert_eq!(series("gen_ai_usage_input_tokens"), 12 + 1400 + 30);
    assert_eq!(series("gen_ai_usage_cache_read_input_tokens"), 1400);
    assert_eq!(series("gen_ai_usage_cache_creation_input_tokens"), 30);
    assert_eq!(series("kvlint_prompt_tokens_cache_written"), 30);
    assert_eq!(series("kvlint_prompt_tokens_cached"), 1400);
}
