//! OpenTelemetry traces of a real agent loop: the `openai` Python client, instrumented by
//! opentelemetry-instrumentation-openai-v2 (GenAI semantic conventions, content on spans) and by
//! OpenInference, talking to the tests' llama-server and exported as OTLP JSON
//! (`scripts/otel_traces.py`), beside the bodies it sent on the wire. `kvlint` on the raw
//! trace must find the conversation and the side call apart, rebuild each prompt as sent
//! (texts exact, tool-call arguments equal as JSON, tools where the trace keeps them), mark
//! the sessions reconstructed, and find what it finds on the bodies sent.
//!
//! The traces in `fixtures/recordings/otel/` were made that way; the live test makes them
//! again against a llama-server it starts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const MODES: [&str; 2] = ["genai", "openinference"];

/// The conversation's four turns, and the title call made between its second and third.
const SESSIONS: [&[usize]; 2] = [&[0, 1, 3, 4], &[2]];

fn run(args: &[&str]) -> (i32, Value) {
    let run = kvlint_fixtures::run_kvlint(env!("CARGO_BIN_EXE_kvlint"), args);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}{}", run.stdout, run.stderr));
    (run.code, report)
}

/// A body's messages with tool-call arguments parsed: the trace keeps their value, not their
/// bytes.
fn messages(body: &Value) -> Value {
    let mut messages = body["messages"].clone();
    for message in messages.as_array_mut().unwrap() {
        for call in message
            .get_mut("tool_calls")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let arguments = &mut call["function"]["arguments"];
            *arguments = serde_json::from_str(arguments.as_str().unwrap()).unwrap();
        }
    }
    messages
}

/// (rule, turn, part) of each finding of the first session in a `check` report.
fn findings(report: &Value) -> Vec<(String, u64, String)> {
    report["sessions"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["turn"].as_u64().unwrap(),
                finding["part"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn compare(trace: &Path, sent: &Path, work: &Path) {
    let name = trace.display().to_string();
    let sent: Vec<Value> = std::fs::read_to_string(sent)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let out = work.join("imported");
    let (code, imported) = run(&[
        "import",
        "--format",
        "json",
        &name,
        "--out",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(code, 0, "{imported}");
    let recording = &imported["recordings"][0];
    assert_eq!(recording["container"], "otlp", "{name}");
    let sessions = recording["sessions"].as_array().unwrap();
    let grouped: Vec<Vec<usize>> = sessions
        .iter()
        .map(|session| serde_json::from_value(session["interactions"].clone()).unwrap())
        .collect();
    assert_eq!(grouped, SESSIONS.map(<[usize]>::to_vec), "{name}");
    for session in sessions {
        assert_eq!(session["reconstructed"], true, "{name}");
        let written =
            kvlint_fixtures::written_requests(Path::new(session["file"].as_str().unwrap()));
        for (body, interaction) in written
            .iter()
            .zip(session["interactions"].as_array().unwrap())
        {
            let wire = &sent[interaction.as_u64().unwrap() as usize];
            assert_eq!(messages(body), messages(wire), "{name} {interaction}");
            assert_eq!(body["model"], wire["model"], "{name} {interaction}");
            if let Some(tools) = body.get("tools") {
                assert_eq!(tools, &wire["tools"], "{name} {interaction}");
            }
        }
    }
    // The conversation checked from the trace, and from the bodies it sent.
    let (code, from_trace) = run(&["check", "--format", "json", &name]);
    assert_eq!(code, 1, "{from_trace}");
    let source = &from_trace["sessions"][0]["source"];
    assert_eq!(source["reconstructed"], true, "{name}");
    let conversation = work.join("conversation.jsonl");
    let lines: Vec<String> = SESSIONS[0]
        .iter()
        .map(|index| sent[*index].to_string())
        .collect();
    std::fs::write(&conversation, lines.join("\n")).unwrap();
    let (_, from_wire) = run(&["check", "--format", "json", conversation.to_str().unwrap()]);
    let expected = findings(&from_wire);
    assert!(
        expected.contains(&("volatile-timestamp".into(), 2, "messages[0].content".into())),
        "{expected:?}"
    );
    assert_eq!(findings(&from_trace), expected, "{name}");
}

fn work_dir(name: &str) -> PathBuf {
    let work = std::env::temp_dir().join(format!("kvlint-otel-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    work
}

#[test]
fn recorded_traces_give_the_sessions_and_findings_of_the_bodies_sent() {
    let folder = kvlint_fixtures::repository().join("fixtures/recordings/otel");
    let work = work_dir("recorded");
    for mode in MODES {
        compare(
            &folder.join(format!("{mode}.json")),
            &folder.join(format!("{mode}.sent.jsonl")),
            &work,
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn traces_made_now_against_llama_server_give_the_same() {
    let Some(python) = kvlint_fixtures::reference_python() else {
        return kvlint_fixtures::missing_oracle(
            "the reference venv with opentelemetry-sdk",
            "scripts/setup-python.sh",
        );
    };
    let Some(server) = kvlint_fixtures::start_llama_server() else {
        return kvlint_fixtures::missing_oracle(
            "llama-server and the tiny model",
            "scripts/build-llama-server.sh and scripts/make-tiny-model.py",
        );
    };
    let server = server.wait_until_healthy("/health");
    let script = kvlint_fixtures::repository().join("scripts/otel_traces.py");
    let work = work_dir("live");
    // Both conventions, and the collector's one-document-per-line file.
    for (mode, lines) in [("genai", false), ("openinference", false), ("genai", true)] {
        let trace = work.join(format!("{mode}-{lines}.json"));
        let sent = work.join(format!("{mode}-{lines}.sent.jsonl"));
        let mut command = Command::new(&python);
        command
            .arg(&script)
            .args(["--base-url", &format!("{}/v1", server.url)])
            .args(["--instrumentation", mode])
            .arg("--out")
            .arg(&trace)
            .arg("--sent")
            .arg(&sent);
        if lines {
            command.arg("--jsonl");
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        compare(&trace, &sent, &work);
    }
    let _ = std::fs::remove_dir_all(&work);
}
