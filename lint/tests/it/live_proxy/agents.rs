//! Agents interleaved on one connection with no session key, as multi-agent apps send them:
//! the proxy groups them live through the one grouping recordings get, so each agent's
//! session is checked against its own previous request (no false break), and each request's
//! kind is counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use super::{llama_server, proxy, wait_for_requests, walk};
use crate::common::{get, metric};

/// The OpenAI bodies of a writer/critic loop and a supervisor with its workers
/// (`fixtures/recordings/agents/`), sent in their recordings' order, one after the other on
/// one kept-alive connection to a real llama-server: each agent's requests are recorded as
/// one session (`EXPECTED.json`'s, request for request), no break is counted but those
/// `kvlint check` finds in the recordings, and the kinds add up to the recordings' own.
#[test]
fn interleaved_agents_without_keys_are_told_apart_live() {
    let engine = llama_server();
    let record = std::env::temp_dir().join(format!("kvlint-proxy-keyless-{}", std::process::id()));
    std::fs::remove_dir_all(&record).ok();
    let metrics_port = kvlint_fixtures::free_port();
    let proxy = proxy(&engine, &record, metrics_port);
    let agents = kvlint_fixtures::repository().join("fixtures/recordings/agents");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(agents.join("EXPECTED.json")).unwrap())
            .unwrap();
    let connection = ureq::Agent::new_with_defaults();
    let mut wanted_sessions: Vec<Vec<Value>> = Vec::new();
    let mut wanted_kinds: Vec<String> = Vec::new();
    let mut sent = 0;
    for file in ["writer-critic.har", "supervisor-trailing-instruction.har"] {
        let har: Value =
            serde_json::from_str(&std::fs::read_to_string(agents.join(file)).unwrap()).unwrap();
        let bodies: Vec<Value> = har["log"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                let mut body: Value =
                    serde_json::from_str(entry["request"]["postData"]["text"].as_str().unwrap())
                        .unwrap();
                // One token each: the tiny model's answer is not what is tested.
                body["max_tokens"] = Value::from(1);
                body
            })
            .collect();
        for body in &bodies {
            let answer = connection
                .post(format!("{}/v1/chat/completions", proxy.url))
                .send_json(body)
                .unwrap();
            assert_eq!(answer.status(), 200, "{file}");
            sent += 1;
        }
        let truth = &expected["files"][file];
        for session in truth["sessions"].as_array().unwrap() {
            let requests = session["entries"].as_array().unwrap();
            wanted_sessions.push(
                requests
                    .iter()
                    .map(|entry| bodies[entry.as_u64().unwrap() as usize]["messages"].clone())
                    .collect(),
            );
        }
        // Live, what follows is not known: an agent handed the history without tools is a
        // side call at its first request (a recording's reader sees its session go on).
        wanted_kinds.extend(truth["kinds"].as_array().unwrap().iter().zip(&bodies).map(
            |(kind, body)| match kind.as_str().unwrap() {
                "sub-agent" if body.get("tools").is_none() => "side-call".to_owned(),
                kind => kind.to_owned(),
            },
        ));
    }
    let metrics = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), sent);
    let metrics_text = get(&format!("http://127.0.0.1:{metrics_port}/metrics"));
    drop(proxy);
    // Each recorded session's requests, by their messages.
    let mut recorded: Vec<Vec<Value>> = walk(&record)
        .iter()
        .map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(|line| {
                    let exchange: Value = serde_json::from_str(line).unwrap();
                    exchange["request"]["messages"].clone()
                })
                .collect()
        })
        .collect();
    let key = |session: &Vec<Value>| session[0].to_string();
    recorded.sort_by_key(key);
    wanted_sessions.sort_by_key(key);
    assert_eq!(recorded, wanted_sessions);
    // No agent's request read as a break of another's session: the findings between turns
    // are those `kvlint check` gives the recordings (the supervisor's per-turn tail, info).
    let mut between_turns = 0;
    for file in ["writer-critic.har", "supervisor-trailing-instruction.har"] {
        let (_, report) = crate::import::json_of("check", &[agents.join(file)]);
        between_turns += report["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|session| session["findings"].as_array().unwrap())
            .filter(|finding| finding["turn"] != 0)
            .count();
    }
    assert_eq!(
        metric(&metrics, "kvlint_findings_total"),
        between_turns as f64,
        "{metrics}"
    );
    for kind in ["main-turn", "sub-agent", "tool-round-trip", "side-call"] {
        let count = wanted_kinds.iter().filter(|each| *each == kind).count();
        let series = format!(
            "kvlint_request_kinds_total{{upstream=\"{}\",kind=\"{kind}\"}}",
            engine.url
        );
        assert_eq!(
            metric(&metrics_text, &series),
            count as f64,
            "{kind}: {metrics_text}"
        );
    }
    std::fs::remove_dir_all(&record).ok();
}
