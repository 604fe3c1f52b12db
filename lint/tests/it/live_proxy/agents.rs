//! Agents interleaved on one connection with no session key, as multi-agent apps send them:
//! the proxy groups them live through the one grouping recordings get, so each agent's
//! session is checked against its own previous request (no false break), and each request's
//! kind is counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use super::{llama_server, proxy, recorded_requests, wait_for_requests};
use crate::common::metric;

/// The OpenAI bodies of a writer/critic loop and a supervisor with its workers
/// (`fixtures/recordings/agents/`), sent in their recordings' order, one after the other on
/// one kept-alive connection to a real llama-server: each agent's requests are recorded as
/// one session (`EXPECTED.json`'s, request for request), no break is counted but the
/// supervisor's per-turn tail, and the kinds add up to the recordings' own.
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
    drop(proxy);
    // Each recorded session's requests, by their messages.
    let mut recorded: Vec<Vec<Value>> = recorded_requests(&record)
        .into_iter()
        .map(|requests| {
            requests
                .into_iter()
                .map(|request| request["messages"].clone())
                .collect()
        })
        .collect();
    let key = |session: &Vec<Value>| session[0].to_string();
    recorded.sort_by_key(key);
    wanted_sessions.sort_by_key(key);
    assert_eq!(recorded, wanted_sessions);
    // No agent's request read as a break of another's session. The one finding left is by
    // construction: the supervisor re-sends its routing instruction after the new items, a
    // per-turn tail (info) on each of its turns after the first.
    let supervisor = expected["files"]["supervisor-trailing-instruction.har"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|session| session["label"] == "supervisor")
        .unwrap();
    let tails = supervisor["entries"].as_array().unwrap().len() - 1;
    let series = format!(
        "kvlint_findings_total{{upstream=\"{}\",rule=\"history-rewrite\"}}",
        engine.url
    );
    assert_eq!(metric(&metrics, &series), tails as f64, "{metrics}");
    assert_eq!(
        metric(&metrics, "kvlint_findings_total"),
        tails as f64,
        "{metrics}"
    );
    for kind in ["main-turn", "sub-agent", "tool-round-trip", "side-call"] {
        let count = wanted_kinds.iter().filter(|each| *each == kind).count();
        let series = format!(
            "kvlint_request_kinds_total{{upstream=\"{}\",kind=\"{kind}\"}}",
            engine.url
        );
        assert_eq!(metric(&metrics, &series), count as f64, "{kind}: {metrics}");
    }
    std::fs::remove_dir_all(&record).ok();
}
