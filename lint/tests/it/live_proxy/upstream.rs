//! The proxy and its upstream: https with a certificate checked, a dead upstream, big bodies,
//! many clients and clients that leave, and the upstream's errors passed on as sent.

use super::*;

/// An engine behind https (nginx with a certificate of its own authority): forwarded,
/// predicted and counted as over http once the proxy trusts that authority, and refused
/// (502, with the reason) when it does not.
#[test]
fn an_https_upstream_is_forwarded_and_its_certificate_checked() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-tls-{}", std::process::id()));
    let engine = llama_server();
    let gateway = common::tls_gateway(&engine, &folder.join("nginx"));
    let authority = folder.join("nginx/ca.pem");
    let metrics_port = kvlint_fixtures::free_port();
    let trusting = proxy_with(
        &gateway,
        &folder.join("sessions"),
        metrics_port,
        &["--upstream-ca", authority.to_str().unwrap()],
    );
    let engine_before = get(&format!("{}/metrics", engine.url));
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent. ".repeat(20)})];
    let turns = 4;
    for turn in 0..turns {
        messages
            .push(json!({"role": "user", "content": format!("Step {turn}: read the next file.")}));
        let body = json!({"messages": messages, "max_tokens": 1, "temperature": 0});
        let answer = common::post(&trusting.url, "/v1/chat/completions", &body).unwrap();
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        messages.push(json!({"role": "assistant", "content": text}));
    }
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), turns);
    let engine_after = get(&format!("{}/metrics", engine.url));
    let engine_delta = |name: &str| metric(&engine_after, name) - metric(&engine_before, name);
    assert_eq!(metric(&counted, "kvlint_requests_total"), turns as f64);
    assert_eq!(
        metric(&counted, "kvlint_prompt_tokens_total"),
        engine_delta("llamacpp:prompt_tokens_total")
            + metric(&counted, "kvlint_prompt_tokens_cached_total"),
        "{counted}"
    );
    // The engine's tokens came over https too: the prediction is the engine's own count.
    let cached = metric(&counted, "kvlint_prompt_tokens_cached_total");
    assert!(cached > 0.0, "{counted}");
    assert_eq!(
        metric(&counted, "kvlint_prompt_tokens_predicted_cached_total"),
        cached,
        "{counted}"
    );
    drop(trusting);

    // Without the authority: the certificate is not trusted, and the client is told.
    let doubting = proxy(
        &gateway,
        &folder.join("refused"),
        kvlint_fixtures::free_port(),
    );
    let refused = common::post(
        &doubting.url,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
    )
    .unwrap_err();
    assert!(
        refused.contains("kvlint proxy") && refused.contains("certificate"),
        "{refused}"
    );
    std::fs::remove_dir_all(&folder).ok();
}

/// Whatever the upstream or the client does, the proxy answers as the upstream answered, or
/// says why it could not, and keeps serving.
#[test]
fn the_proxy_survives_a_dead_upstream_big_bodies_many_clients_and_clients_that_leave() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-hostile-{}", std::process::id()));
    // An upstream nobody listens on (port 1): 502 with the reason, counted.
    let metrics_port = kvlint_fixtures::free_port();
    let dead = proxy_to(
        &["http://127.0.0.1:1"],
        &folder.join("dead"),
        metrics_port,
        &[],
    );
    let errors = || {
        let counted = get(&format!("http://127.0.0.1:{metrics_port}/metrics"));
        metric(&counted, "kvlint_proxy_upstream_errors_total")
    };
    let before = errors();
    let refused = common::post(
        &dead.url,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap_err();
    assert!(refused.contains("Connection refused"), "{refused}");
    assert_eq!(errors(), before + 1.0);
    drop(dead);

    let engine = llama_server();
    let proxy = proxy(&engine, &folder, kvlint_fixtures::free_port());
    // A 10 MB body: forwarded whole, and the engine's own answer comes back unchanged.
    let huge = json!({"messages": [{"role": "user", "content": "word ".repeat(2_000_000)}], "max_tokens": 1});
    let status = |url: &str| {
        ureq::post(format!("{url}/v1/chat/completions"))
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(&huge)
            .unwrap()
            .status()
    };
    assert_eq!(status(&proxy.url), status(&engine.url));
    // A client that leaves in the middle of a stream.
    {
        let mut response = ureq::post(format!("{}/v1/chat/completions", proxy.url))
            .send_json(json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "stream": true}))
            .unwrap();
        let mut first = [0u8; 16];
        response
            .body_mut()
            .as_reader()
            .read_exact(&mut first)
            .unwrap();
    }
    // 1,000 clients at once.
    let clients: Vec<_> = (0..1000)
        .map(|_| {
            let url = format!("{}/health", proxy.url);
            std::thread::spawn(move || ureq::get(&url).call().map(|answer| answer.status()))
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap().unwrap(), 200);
    }
    assert_eq!(
        ureq::get(format!("{}/health", proxy.url))
            .call()
            .unwrap()
            .status(),
        200
    );
    // The peak memory of all that: the 10 MB body, a stream cut short, 1,000 connections.
    let status = std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap();
    eprintln!("kvlint proxy peak resident memory: {} MB", peak_kb / 1024);
    assert!(peak_kb < 512 * 1024, "{peak_kb} kB");
    std::fs::remove_dir_all(&folder).ok();
}

/// What a client gets through the proxy and directly from `url`: status, `Retry-After`, and
/// the body as far as it arrived (a truncated one ends where the upstream cut it).
fn answered(url: &str, path: &str, body: &Value) -> (u16, Option<String>, Vec<u8>, bool) {
    let mut response = ureq::post(format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(body)
        .unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().to_owned());
    let mut bytes = Vec::new();
    let whole = response
        .body_mut()
        .as_reader()
        .read_to_end(&mut bytes)
        .is_ok();
    (response.status().as_u16(), retry_after, bytes, whole)
}

/// An upstream that answers 429, 500, a malformed body, slowly, or cuts its answer short:
/// the client gets what it would have got directly, the proxy keeps serving, and each
/// exchange is recorded once, the cut ones marked so.
#[test]
fn the_upstream_s_errors_reach_the_client_as_the_upstream_sent_them() {
    let folder = std::env::temp_dir().join(format!("kvlint-proxy-troubled-{}", std::process::id()));
    let engine = llama_server();
    let gateway = common::troubled_gateway(&engine, &folder.join("nginx"));
    // A server that sends a head and part of the body it announced, then hangs up.
    let cutter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cutter_url = format!("http://{}", cutter.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in cutter.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 65536];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{\"id\": \"chatcmpl-cut\", \"choices\": [",
            );
        }
    });
    let record = folder.join("sessions");
    let metrics_port = kvlint_fixtures::free_port();
    let proxy = proxy(&gateway, &record, metrics_port);
    let body = |text: &str| json!({"messages": [{"role": "user", "content": text}], "max_tokens": 2, "temperature": 0});
    let mut sent = 0;
    for prefix in ["/rate-limited", "/failing", "/malformed", "/slow"] {
        let path = format!("{prefix}/v1/chat/completions");
        let request = body(&format!("Through {prefix}."));
        let direct = answered(&gateway.url, &path, &request);
        let proxied = answered(&proxy.url, &path, &request);
        sent += 1;
        assert_eq!(proxied.0, direct.0, "{prefix}");
        assert_eq!(proxied.1, direct.1, "{prefix}");
        assert!(proxied.3 && direct.3, "{prefix}");
        if prefix != "/slow" {
            assert_eq!(proxied.2, direct.2, "{prefix}");
        } else {
            // The engine's answer, slowly: its id and timings differ from one run to the next.
            let answer: Value = serde_json::from_slice(&proxied.2).unwrap();
            assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        }
    }
    assert_eq!(
        answered(
            &gateway.url,
            "/rate-limited/v1/chat/completions",
            &body("x")
        )
        .0,
        429
    );
    // Cut short: the client sees the same cut, through the proxy as directly.
    let cutting_metrics = kvlint_fixtures::free_port();
    let cutting = proxy_to(
        &[cutter_url.as_str()],
        &record.join("cut"),
        cutting_metrics,
        &[],
    );
    let request = body("Cut me short.");
    let direct = answered(&cutter_url, "/v1/chat/completions", &request);
    let proxied = answered(&cutting.url, "/v1/chat/completions", &request);
    assert_eq!(
        (proxied.0, &proxied.2, proxied.3),
        (direct.0, &direct.2, direct.3)
    );
    assert!(!proxied.3, "the body ends before its announced length");
    wait_for_requests(&format!("http://127.0.0.1:{cutting_metrics}/metrics"), 1);
    drop(cutting);
    // Still serving.
    let answer = common::post(&proxy.url, "/v1/chat/completions", &body("Still there?")).unwrap();
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    sent += 1;
    let counted = wait_for_requests(&format!("http://127.0.0.1:{metrics_port}/metrics"), sent);
    assert_eq!(
        metric(&counted, "kvlint_requests_total"),
        sent as f64,
        "{counted}"
    );
    assert_eq!(
        metric(&counted, "kvlint_proxy_upstream_errors_total"),
        0.0,
        "{counted}"
    );
    drop(proxy);
    // Each exchange recorded once: the failed ones with what the upstream said, the cut one
    // marked as cut; and the records read as sessions.
    let lines: Vec<Value> = walk(&record)
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect();
    assert_eq!(lines.len(), sent + 1, "{lines:#?}");
    let said = |text: &str| {
        lines
            .iter()
            .filter(|line| line["request"]["messages"][0]["content"] == text)
            .collect::<Vec<_>>()
    };
    for (text, status) in [("Through /rate-limited.", 429), ("Through /failing.", 500)] {
        let recorded = said(text);
        assert_eq!(recorded.len(), 1, "{text}");
        assert_eq!(recorded[0]["status"], status, "{text}");
    }
    let cut = said("Cut me short.");
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0]["complete"], false);
    let checked = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["check", "--format", "json"])
        .args(walk(&record))
        .output()
        .unwrap();
    assert_ne!(
        checked.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    std::fs::remove_dir_all(&folder).ok();
}
