//! The proxy in front of a fleet: lost locality across replicas adds up to what they computed
//! again, and behind a gateway that says nothing the causes it gives are honest.

use super::*;

/// Sends each body of `session` through the proxy with the SDK's routing header, as the
/// agent would (one generated token, greedy).
fn send_session(proxy: &Served, session: &Path, routing_key: &str) -> usize {
    let bodies = std::fs::read_to_string(session).unwrap();
    let mut sent = 0;
    for line in bodies.lines() {
        let mut body: Value = serde_json::from_str(line).unwrap();
        body["max_tokens"] = json!(1);
        body["temperature"] = json!(0);
        ureq::post(format!("{}/v1/chat/completions", proxy.url))
            .header("x-kvlint-routing-key", routing_key)
            .send_json(&body)
            .unwrap();
        sent += 1;
    }
    sent
}

/// Prompt tokens the replicas computed (not served from cache), from their own counters.
fn computed(replicas: &[&Served]) -> f64 {
    replicas
        .iter()
        .map(|replica| {
            metric(
                &get(&format!("{}/metrics", replica.url)),
                "llamacpp:prompt_tokens_total",
            )
        })
        .sum()
}

/// How the fleet test puts two replicas behind the proxy.
enum Front {
    /// nginx with this balancing line, naming the replica in a response header.
    Gateway(&'static str),
    /// nginx round-robin, silent: the proxy reads the replicas' metrics.
    SilentGateway,
    /// The proxy itself, with these options, each replica an `--upstream`.
    Upstreams(&'static [&'static str]),
}

/// Two replicas, the proxy in front, sent one session. Round-robin (nginx's, or the proxy's)
/// sends turns of the session to the replica that did not see the turn before: the proxy
/// counts those tokens as lost to locality, and they are exactly what the replicas computed
/// beyond what the same session costs when nginx hashes on the SDK's routing key, where none
/// are lost, as none are when the proxy balances on the routing key itself.
#[test]
fn lost_locality_adds_up_to_what_the_replicas_computed_again() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-fleet-{}", std::process::id()));
    let (session, routing_key) = common::sdk_session(&folder);
    let runs: Vec<(&str, f64, f64, f64, String)> = [
        (
            "nginx hash",
            Front::Gateway("hash $http_x_kvlint_routing_key consistent;"),
        ),
        ("nginx round-robin", Front::Gateway("")),
        (
            "nginx round-robin, replicas read off their metrics",
            Front::SilentGateway,
        ),
        (
            "proxy round-robin",
            Front::Upstreams(&["--balance", "round-robin"]),
        ),
        ("proxy routing-key", Front::Upstreams(&[])),
    ]
    .into_iter()
    .map(|(name, front)| {
        let (first, second) = (common::replica(), common::replica());
        let (first, second) = (
            first.wait_until_healthy("/health"),
            second.wait_until_healthy("/health"),
        );
        let replicas = [&first, &second];
        let scratch = folder.join(name.replace([' ', ','], "-"));
        let metrics_port = kvlint_fixtures::free_port();
        let record = scratch.join("sessions");
        let (_gateway, proxy) = match front {
            Front::Gateway(balance) => {
                let gateway = common::gateway(&replicas, balance, &scratch);
                // The proxy asks a replica for tokens, not the gateway, whose balancing its
                // own requests would shift.
                let options = ["--engine-api", &first.url];
                let proxy = proxy_with(&gateway, &record, metrics_port, &options);
                (Some(gateway), proxy)
            }
            Front::SilentGateway => {
                let gateway = common::silent_gateway(&replicas, "", &scratch);
                let options = [
                    "--replica-metrics",
                    &first.url,
                    "--replica-metrics",
                    &second.url,
                ];
                let proxy = proxy_with(&gateway, &record, metrics_port, &options);
                (Some(gateway), proxy)
            }
            Front::Upstreams(options) => {
                let upstreams = [first.url.as_str(), second.url.as_str()];
                (None, proxy_to(&upstreams, &record, metrics_port, options))
            }
        };
        let before = computed(&replicas);
        let turns = send_session(&proxy, &session, &routing_key);
        let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
        let computed_again = computed(&replicas) - before;
        // Each turn's record names the replica that served it.
        let named: Vec<String> = walk(&record)
            .iter()
            .flat_map(|path| {
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(|line| serde_json::from_str::<Value>(line).unwrap()["replica"].to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(named.len(), turns, "{name}");
        assert!(
            named.iter().all(|replica| replica.contains("127.0.0.1:")),
            "{name}: {named:?}"
        );
        let lost = |cause: &str| {
            let label = format!("cause=\"{cause}\"");
            counted
                .lines()
                .filter(|line| {
                    line.starts_with("kvlint_prompt_tokens_lost_total{") && line.contains(&label)
                })
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        let other = [
            "eviction",
            "locality_or_eviction",
            "ttl",
            "below_minimum",
            "unknown",
        ]
        .map(lost)
        .iter()
        .sum();
        (name, computed_again, lost("locality"), other, counted)
    })
    .collect();
    let (_, hash_computed, ..) = runs[0];
    for (name, computed_again, locality, other, metrics) in &runs {
        eprintln!("{name}: computed {computed_again}, lost to locality {locality}, other {other}");
        assert_eq!(*other, 0.0, "{name}\n{metrics}");
        assert_eq!(
            *locality,
            computed_again - hash_computed,
            "{name}\n{metrics}"
        );
        let keeps_locality = name.contains("hash") || name.contains("routing-key");
        assert_eq!(*locality == 0.0, keeps_locality, "{name}\n{metrics}");
    }
    std::fs::remove_dir_all(&folder).ok();
}

/// Sends `sessions` growing conversations of `turns` turns through the proxy at `url`,
/// interleaved (turn 0 of each, then turn 1, …), as agents do (each answer sent back in the
/// next turn), the system prompt of a session's turn `system(session, turn)`; returns which
/// of `replicas` served each request, read off their generated-token counters.
fn converse(
    url: &str,
    replicas: &[&Served],
    system: impl Fn(usize, usize) -> String,
    (sessions, turns): (usize, usize),
) -> Vec<usize> {
    let generated = |replica: &&Served| {
        metric(
            &get(&format!("{}/metrics", replica.url)),
            "llamacpp:tokens_predicted_total",
        )
    };
    let mut histories = vec![Vec::new(); sessions];
    let mut served_by = Vec::new();
    for (turn, session) in
        (0..turns).flat_map(|turn| (0..sessions).map(move |session| (turn, session)))
    {
        let history = &mut histories[session];
        history.push(json!({"role": "user", "content": format!("Step {turn}: read the next file and say what it does.")}));
        let mut messages = vec![json!({"role": "system", "content": system(session, turn)})];
        messages.extend(history.iter().cloned());
        let before: Vec<f64> = replicas.iter().map(generated).collect();
        let body = json!({"messages": messages, "max_tokens": 4, "temperature": 0});
        let answer = common::post(url, "/v1/chat/completions", &body).unwrap();
        let moved: Vec<usize> = replicas
            .iter()
            .map(generated)
            .zip(&before)
            .enumerate()
            .filter(|(_, (now, before))| now > *before)
            .map(|(index, _)| index)
            .collect();
        assert_eq!(moved.len(), 1, "turn {turn}: {moved:?}");
        served_by.push(moved[0]);
        history.push(answer["choices"][0]["message"].clone());
    }
    served_by
}

/// Two llama-server replicas behind nginx round-robin that does not say which one served.
/// The proxy asks one replica itself for tokens and settings, so only the agent's requests
/// pass through the gateway and its turns alternate replicas. With the replicas read off their
/// metrics, the prediction (llama.cpp's slots and host prompt cache, generated tokens kept, as
/// `kvlint simulate` models them) is what the replicas served, three sessions taking turns on
/// each replica's one slot. Without, the losses the
/// alternation causes are `locality_or_eviction` (the replica cannot be known), never
/// `eviction`; and a timestamp in the system prompt is a loss named by its rule.
#[test]
fn behind_a_silent_round_robin_gateway_the_causes_are_honest() {
    if common::nginx_binary().is_none() {
        return kvlint_fixtures::missing_oracle(
            "nginx",
            "apt-get install nginx (scripts/test.sh does)",
        );
    }
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-silent-{}", std::process::id()));
    let (first, second) = (common::replica(), common::replica());
    let (first, second) = (
        first.wait_until_healthy("/health"),
        second.wait_until_healthy("/health"),
    );
    let replicas = [&first, &second];
    let gateway = common::silent_gateway(&replicas, "", &folder.join("nginx"));
    let rules = "You are a careful coding agent: read before you write, and test what you change. "
        .repeat(12);
    let alternates = |served_by: &[usize]| served_by.windows(2).all(|pair| pair[0] != pair[1]);

    let metrics_port = kvlint_fixtures::free_port();
    let options = [
        "--replica-metrics",
        &first.url,
        "--replica-metrics",
        &second.url,
    ];
    let known = proxy_with(&gateway, &folder.join("known"), metrics_port, &options);
    let turns = 6;
    let project = |session: usize, _| format!("Project {session}.\n{rules}");
    let served_by = converse(&known.url, &replicas, project, (3, turns));
    assert!(alternates(&served_by), "{served_by:?}");
    let counted = wait_for_requests(
        &format!("http://127.0.0.1:{metrics_port}/metrics"),
        3 * turns,
    );
    let served = metric(&counted, "kvlint_prompt_tokens_cached_total");
    let predicted = metric(&counted, "kvlint_prompt_tokens_predicted_cached_total");
    eprintln!("served {served}, predicted {predicted}");
    assert!(served > 0.0, "{counted}");
    assert_eq!(predicted, served, "{counted}");
    drop(known);

    let metrics_port = kvlint_fixtures::free_port();
    let options = ["--engine-api", &first.url];
    let unknown = proxy_with(&gateway, &folder.join("unknown"), metrics_port, &options);
    let timestamped = |_, turn: usize| {
        let minute = if turn < 3 { 0 } else { 5 };
        format!("Current time: 2026-12-01T10:{minute:02}:00Z.\n{rules}")
    };
    let served_by = converse(&unknown.url, &replicas, timestamped, (1, turns));
    assert!(alternates(&served_by), "{served_by:?}");
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
    let lost = |cause: &str| {
        metric(
            &counted,
            &format!(
                "kvlint_prompt_tokens_lost_total{{upstream=\"{}\",cause=\"{cause}\"}}",
                gateway.url
            ),
        )
    };
    eprintln!(
        "locality_or_eviction {}, volatile-timestamp {}",
        lost("locality_or_eviction"),
        lost("volatile-timestamp")
    );
    assert!(lost("locality_or_eviction") > 0.0, "{counted}");
    assert_eq!(
        lost("eviction") + lost("locality") + lost("unknown"),
        0.0,
        "{counted}"
    );
    assert!(lost("volatile-timestamp") > 0.0, "{counted}");
    std::fs::remove_dir_all(&folder).ok();
}
