//! Helpers shared by the live tests (each uses some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kvlint_fixtures::Served;

use kvlint_sdk::{Conversation, Tool, ToolCall};
use serde_json::{Value, json};

/// Writes four turns of an agent loop assembled with the SDK (tools added in no particular
/// order, a session memory, a clock and a request id in the turn tier) as OpenAI chat bodies
/// to `folder/sdk-session.jsonl`; returns the file and the session's routing key.
pub fn sdk_session(folder: &Path) -> (PathBuf, String) {
    let mut conversation = Conversation::new();
    conversation
        .add_tool(Tool::new(
            "run_tests",
            "Run the tests.",
            json!({"type": "object", "properties": {"filter": {"type": "string"}}}),
        ))
        .into_result()
        .unwrap();
    conversation
        .add_tool(Tool::new(
            "read_file",
            "Read a file.",
            json!({"properties": {"path": {"type": "string"}}, "type": "object"}),
        ))
        .into_result()
        .unwrap();
    conversation
        .add_static(
            "You are a coding agent. Read before you edit; run the tests after each change.",
        )
        .into_result()
        .unwrap();
    conversation
        .add_session("memory", "The user prefers small commits.")
        .into_result()
        .unwrap();
    conversation
        .push_user("The test parses_dates fails. Fix it.")
        .into_result()
        .unwrap();
    let mut bodies = Vec::new();
    for turn in 0..4 {
        conversation.add_turn_context(format!(
            "Current time: 2025-03-04T10:22:{:02}Z; request req_{turn:06x}",
            31 + turn
        ));
        bodies.push(conversation.to_openai_chat("tiny").to_string());
        let call = ToolCall::new(
            format!("call{turn}"),
            "read_file",
            &json!({"path": format!("src/{turn}.rs")}),
        );
        conversation
            .push_assistant("Reading.", vec![call.clone()])
            .into_result()
            .unwrap();
        conversation
            .push_tool_result(call.id(), format!("contents of file {turn}"))
            .into_result()
            .unwrap();
    }
    std::fs::create_dir_all(folder).expect("a scratch folder");
    let path = folder.join("sdk-session.jsonl");
    std::fs::write(&path, bodies.join("\n")).expect("the session file");
    (path, conversation.routing_key())
}

/// POSTs `body` to an engine; its answer, or the error message it answers with.
pub fn post(url: &str, path: &str, body: &Value) -> Result<Value, String> {
    let mut response = ureq::post(format!("{url}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(body)
        .map_err(|error| error.to_string())?;
    let status = response.status();
    let answer: Value = response
        .body_mut()
        .read_json()
        .map_err(|error| error.to_string())?;
    if status.is_success() {
        Ok(answer)
    } else {
        Err(answer["error"]["message"].to_string())
    }
}

/// A llama-server replica with the tiny model.
pub fn replica() -> Served {
    kvlint_fixtures::start_llama_server()
        .expect("llama-server or the tiny model missing: run scripts/build-llama-server.sh and scripts/make-tiny-model.py")
}

/// nginx's binary, when installed (Debian's package).
pub fn nginx_binary() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

fn nginx() -> PathBuf {
    nginx_binary().expect("nginx missing: apt-get install nginx (scripts/test.sh does)")
}

/// nginx in front of the replicas, with `balance` as the upstream's balancing line: one
/// process (no master and workers), so that stopping it leaves none behind. Each response
/// names the replica that served it in `X-Kvlint-Replica`.
pub fn gateway(replicas: &[&Served], balance: &str, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let server = format!(
        "listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://replicas; proxy_http_version 1.1; add_header X-Kvlint-Replica $upstream_addr always; }}"
    );
    start_nginx(folder, &upstream_block(replicas, balance), &server, port)
}

/// nginx as the plain reverse proxy people put in front of an engine, for comparison with
/// `kvlint proxy` on equal terms: a new connection to the engine per request (nginx's
/// default, as the proxy does for plain http), the request body held in memory (as the proxy
/// holds it) and the response passed on as it arrives.
pub fn reverse_proxy(replica: &Served, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let server = format!(
        "listen 127.0.0.1:{port};\n    client_max_body_size 8m;\n    client_body_buffer_size 8m;\n    \
         location / {{ proxy_pass http://replicas; proxy_http_version 1.1; proxy_buffering off; }}"
    );
    start_nginx(folder, &upstream_block(&[replica], ""), &server, port)
}

/// nginx answering every POST with the JSON file `answer` (a recorded response replayed): an
/// upstream whose answers a test fixes.
pub fn replayed_answer(answer: &Path, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let root = answer.parent().unwrap().display();
    let file = answer.file_name().unwrap().to_string_lossy();
    // A static file answers a POST with 405: turned into the file itself.
    let server = format!(
        "listen 127.0.0.1:{port};\n    location = /health {{ return 200 'ok'; }}\n    \
         location / {{ root {root}; default_type application/json; try_files /{file} =404; error_page 405 =200 $uri; }}"
    );
    start_nginx(folder, "", &server, port)
}

/// nginx in front of `target` that rewrites `from` into `to` in each JSON response on its way
/// back (`sub_filter`): a gateway that alters what the API returned.
pub fn rewriting_gateway(target: &Served, from: &str, to: &str, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let server = format!(
        "listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://replicas; proxy_http_version 1.1; \
         proxy_set_header Accept-Encoding \"\"; sub_filter '{from}' '{to}'; sub_filter_once off; \
         sub_filter_types application/json; }}"
    );
    start_nginx(folder, &upstream_block(&[target], ""), &server, port)
}

/// The same gateway, but its responses do not say which replica served them.
pub fn silent_gateway(replicas: &[&Served], balance: &str, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let server = format!(
        "listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://replicas; proxy_http_version 1.1; }}"
    );
    start_nginx(folder, &upstream_block(replicas, balance), &server, port)
}

/// nginx serving https in front of `replica`, with a certificate its own authority signed
/// (made with openssl in `folder`): the URL is `https://127.0.0.1:PORT`, and the authority's
/// certificate is `folder/ca.pem`.
pub fn tls_gateway(replica: &Served, folder: &Path) -> Served {
    std::fs::create_dir_all(folder).unwrap();
    let openssl = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(folder)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl");
        assert!(status.success(), "openssl {args:?}");
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=kvlint test authority",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        folder.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    ]);
    let (port, health_port) = (kvlint_fixtures::free_port(), kvlint_fixtures::free_port());
    let dir = folder.display();
    let server = format!(
        "listen 127.0.0.1:{port} ssl;\n    listen 127.0.0.1:{health_port};\n    \
         ssl_certificate {dir}/server.pem;\n    ssl_certificate_key {dir}/server.key;\n    \
         location / {{ proxy_pass http://replicas; proxy_http_version 1.1; }}"
    );
    let mut served = start_nginx(
        folder,
        &upstream_block(&[replica], ""),
        &server,
        health_port,
    );
    served.url = format!("https://127.0.0.1:{port}");
    served
}

/// nginx answering as an upstream in trouble does, at one path prefix each, with the engine
/// behind it for the rest: `/rate-limited` (429 with `Retry-After`), `/failing` (500),
/// `/malformed` (200 with a body that is not JSON), `/slow` (the engine's answer at 200
/// bytes a second).
pub fn troubled_gateway(replica: &Served, folder: &Path) -> Served {
    let port = kvlint_fixtures::free_port();
    let server = format!(
        "listen 127.0.0.1:{port};\n    \
         location /rate-limited/ {{ add_header Retry-After 1 always; default_type application/json; return 429 '{{\"error\": {{\"message\": \"Rate limit reached\", \"type\": \"rate_limit_error\"}}}}'; }}\n    \
         location /failing/ {{ default_type application/json; return 500 '{{\"error\": {{\"message\": \"internal error\"}}}}'; }}\n    \
         location /malformed/ {{ default_type application/json; return 200 '{{\"id\": \"chatcmpl-1\", \"choices\": [{{\"message\": '; }}\n    \
         location /slow/ {{ proxy_pass http://replicas/; proxy_http_version 1.1; limit_rate 200; }}\n    \
         location / {{ proxy_pass http://replicas; proxy_http_version 1.1; }}"
    );
    start_nginx(folder, &upstream_block(&[replica], ""), &server, port)
}

fn upstream_block(replicas: &[&Served], balance: &str) -> String {
    let servers: String = replicas
        .iter()
        .map(|replica| {
            format!(
                "    server {};\n",
                replica.url.trim_start_matches("http://")
            )
        })
        .collect();
    format!("upstream replicas {{\n    {balance}\n{servers}  }}\n")
}

/// nginx with `upstream` and one `server` block, in `folder`; healthy once `/health` answers
/// on the plain `health_port`.
fn start_nginx(folder: &Path, upstream: &str, server: &str, health_port: u16) -> Served {
    std::fs::create_dir_all(folder).unwrap();
    let dir = folder.display();
    let config = format!(
        "daemon off;\nmaster_process off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\nevents {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n\
         {upstream}\
         server {{\n    {server}\n  }}\n}}\n"
    );
    let path = folder.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(nginx())
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(folder)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Served {
        child,
        url: format!("http://127.0.0.1:{health_port}"),
    }
    .wait_until_healthy("/health")
}

/// The bodies of `sessions` agent sessions of `turns` turns each, sharing a system prompt, in
/// the order an interleaving client sends them (turn 0 of every session, then turn 1, …):
/// `(session, body)`.
pub fn interleaved_workload(sessions: usize, turns: usize) -> Vec<(usize, Value)> {
    let system = "You are a careful coding agent working in a large repository. Read files \
                  before editing them, run the tests after each change, and explain briefly."
        .repeat(3);
    let mut histories: Vec<Vec<Value>> = (0..sessions)
        .map(|_| vec![json!({"role": "system", "content": system})])
        .collect();
    let mut bodies = Vec::new();
    for turn in 0..turns {
        for (session, history) in histories.iter_mut().enumerate() {
            if turn > 0 {
                history.push(json!({"role": "assistant", "content": format!(
                    "Session {session}: step {} is done; the parser change is applied and the tests pass.",
                    turn - 1
                )}));
            }
            history.push(json!({"role": "user", "content": format!(
                "Session {session}, step {turn}: read src/module_{turn}.rs and fix the failing test in it."
            )}));
            bodies.push((
                session,
                json!({"messages": history, "max_tokens": 2, "temperature": 0}),
            ));
        }
    }
    bodies
}

/// Sends `bodies` to `url` one after the other (each with the `x-session` header naming its
/// session), records each session as `{request, response, time}` lines in
/// `folder/session-NN.jsonl`, and returns the cached tokens the engine reported per session
/// and turn.
pub fn replay(url: &str, bodies: &[(usize, Value)], folder: &Path) -> Vec<Vec<u64>> {
    std::fs::create_dir_all(folder).unwrap();
    let sessions = bodies
        .iter()
        .map(|(session, _)| session + 1)
        .max()
        .unwrap_or(0);
    let mut observed = vec![Vec::new(); sessions];
    let mut records = vec![String::new(); sessions];
    for (session, body) in bodies {
        let response: Value = ureq::post(format!("{url}/v1/chat/completions"))
            .header("x-session", &format!("session-{session}"))
            .send_json(body)
            .unwrap()
            .body_mut()
            .read_json()
            .unwrap();
        let cached = response
            .pointer("/usage/prompt_tokens_details/cached_tokens")
            .or_else(|| response.pointer("/timings/cache_n"))
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("no cached tokens reported: {response}"));
        observed[*session].push(cached);
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        records[*session]
            .push_str(&json!({"request": body, "response": response, "time": time}).to_string());
        records[*session].push('\n');
    }
    for (session, record) in records.iter().enumerate() {
        std::fs::write(folder.join(format!("session-{session:02}.jsonl")), record).unwrap();
    }
    observed
}

/// `kvlint simulate`'s arguments for llama-server's own template and vocabulary, for the trace
/// (llama-server's request handling).
pub fn engine_rendering() -> Vec<String> {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let template = assets.join("templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    let tokenizer = kvlint_fixtures::qwen2_vocab_tokenizer()
        .expect("run scripts/test.sh to convert the vocabulary");
    vec![
        "--serving-engine".into(),
        "llamacpp".into(),
        "--chat-template".into(),
        template.display().to_string(),
        "--tokenizer".into(),
        tokenizer.display().to_string(),
    ]
}

/// `kvlint simulate` on the recorded `folder` with `args`: each point's result.
pub fn simulated(folder: &Path, args: &[&str]) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .arg("simulate")
        .arg(folder)
        .args(["--format", "json", "--per-request", "--no-trace-cache"])
        .args(["--arrival", "recorded", "--prefill-tps", "1000"])
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)))
}

/// [`simulated`] rendering as the test suite's llama-server does ([`engine_rendering`]).
pub fn simulated_as_llama_server(folder: &Path, args: &[&str]) -> Vec<Value> {
    let rendering = engine_rendering();
    let mut all: Vec<&str> = rendering.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    simulated(folder, &all)
}

/// `kvlint proxy` in front of `upstreams`, recording into `record`, its counters on
/// `metrics_port`, with `options`; its URL once its metrics answer.
pub fn proxy_to(upstreams: &[&str], record: &Path, metrics_port: u16, options: &[&str]) -> Served {
    let port = kvlint_fixtures::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["proxy", "--listen", &format!("127.0.0.1:{port}")])
        .args(options)
        .args(upstreams.iter().flat_map(|url| ["--upstream", url]))
        .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
        .arg("--record")
        .arg(record)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Up once its metrics answer (the upstreams are up already, or are meant to fail).
    let mut served = Served {
        child,
        url: format!("http://127.0.0.1:{metrics_port}"),
    }
    .wait_until_healthy("/metrics");
    served.url = format!("http://127.0.0.1:{port}");
    served
}

/// The sum of the samples of `name` (and of metrics whose names begin so) in Prometheus text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The body of a GET of `url`.
pub fn get(url: &str) -> String {
    ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// Runs the `kvlint` binary in the repository with `args`: its exit code, standard output and
/// standard error.
pub fn kvlint(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(kvlint_fixtures::repository())
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Headless Chromium's binary, or `None` after [`kvlint_fixtures::missing_oracle`] (which
/// fails under CI).
pub fn chromium() -> Option<&'static Path> {
    let found = [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .into_iter()
    .map(Path::new)
    .find(|path| path.is_file());
    if found.is_none() {
        kvlint_fixtures::missing_oracle("chromium", "apt-get install chromium");
    }
    found
}
