//! Two proxies around a gateway that alters the signed history: the proxy on the client's
//! side and the one on the API's side each check that every thinking block a request sends
//! back is the one the API returned, as each of them saw it returned. The gateway (nginx,
//! `sub_filter`) changes a thinking block's signature in each answer on its way to the client;
//! the client sends back what it received. The proxy before the gateway sees the altered
//! answer come back as it saw it: nothing to say. The one after it saw the answer as the API
//! sent it: the block comes back altered, a refusal it predicts, and so the hop between the
//! two is the one that changed it. The API is a recorded Anthropic answer, replayed.

use super::*;

#[test]
fn a_gateway_that_alters_thinking_blocks_is_caught_by_the_proxy_after_it() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-signed-{}", std::process::id()));
    let answer_file =
        kvlint_fixtures::repository().join("fixtures/proxy/anthropic-thinking-answer.json");
    let answer: Value =
        serde_json::from_str(&std::fs::read_to_string(&answer_file).unwrap()).unwrap();
    let signature = answer["content"][0]["signature"]
        .as_str()
        .unwrap()
        .to_owned();
    // The gateway's change: the signature's first characters, re-signed as a gateway might.
    let (original, altered) = (&signature[..12], "EqGatewaySig");
    let api = common::replayed_answer(&answer_file, &folder.join("api"));
    let (after_port, before_port) = (kvlint_fixtures::free_port(), kvlint_fixtures::free_port());
    let kind = ["--engine-kind", "anthropic"];
    let after = proxy_with(&api, &folder.join("after"), after_port, &kind);
    let gateway = common::rewriting_gateway(&after, original, altered, &folder.join("gateway"));
    let before = proxy_with(&gateway, &folder.join("before"), before_port, &kind);

    let mut messages = vec![json!({"role": "user", "content": "What is 17 * 23?"})];
    // Two turns: the replayed API answers the same blocks each time, which a third turn would
    // send back twice (a real API signs each answer anew).
    let turns = 2;
    for turn in 0..turns {
        let body = json!({"model": "claude-opus-5-5", "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": messages});
        let received = common::post(&before.url, "/v1/messages", &body).unwrap();
        let sent_back = received["content"][0]["signature"].as_str().unwrap();
        assert!(
            sent_back.starts_with(altered),
            "the gateway did not alter the answer"
        );
        messages.push(json!({"role": "assistant", "content": received["content"]}));
        messages.push(json!({"role": "user", "content": format!("And {turn} more?")}));
    }
    let counted = |port: u16| wait_for_requests(&format!("http://127.0.0.1:{port}/metrics"), turns);
    let (before_metrics, after_metrics) = (counted(before_port), counted(after_port));
    let changed = "kvlint_signed_history_changed_total";
    let refused = |text: &str, source: &str| {
        text.lines()
            .filter(|line| {
                line.starts_with("kvlint_signed_history_outcomes_total{")
                    && line.contains("outcome=\"refused\"")
                    && line.contains(&format!("source=\"{source}\""))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    // Before the gateway: every block came back as this proxy saw it returned.
    assert_eq!(metric(&before_metrics, changed), 0.0, "{before_metrics}");
    assert_eq!(
        refused(&before_metrics, "predicted"),
        0.0,
        "{before_metrics}"
    );
    // After it: the second turn sends the first answer's block back altered, a request the
    // API refuses (kvlint predicts; the replayed API does not check).
    let altered_count = after_metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix(&format!("{changed}{{"))
                .filter(|rest| rest.contains("change=\"altered\""))
                .and_then(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        })
        .unwrap_or_else(|| panic!("{after_metrics}"));
    assert_eq!(altered_count, (turns - 1) as f64, "{after_metrics}");
    assert_eq!(metric(&after_metrics, changed), (turns - 1) as f64);
    assert_eq!(
        refused(&after_metrics, "predicted"),
        (turns - 1) as f64,
        "{after_metrics}"
    );
    assert_eq!(refused(&after_metrics, "reported"), 0.0);
    drop((before, gateway, after, api));
    std::fs::remove_dir_all(&folder).ok();
}
