//! `kvlint import` on real recordings from public agent projects' test suites
//! (`fixtures/recordings/`, sources and licenses in its INDEX.json): the sessions found, each
//! turn's body equal to the one PyYAML and Python's json read from the recording
//! (`scripts/recording_bodies.py`, in the reference venv of `scripts/setup-python.sh`), and the
//! written session files checked by `kvlint check`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub(crate) fn recordings() -> PathBuf {
    kvlint_fixtures::repository().join("fixtures/recordings")
}

/// Each recording and the sessions it holds, as the recording's interactions (0-based): read
/// off the files by hand.
const EXPECTED: [(&str, &str, &[&[usize]]); 16] = [
    (
        "pydantic-ai-anthropic-mixed-strict-tool-run.yaml",
        "vcr-yaml",
        &[&[0, 1, 2]],
    ),
    // Four chats run in parallel: A, B, C, D, then B's and A's second turns.
    (
        "chatlas-parallel-chat-tools-uneven.yaml",
        "vcr-yaml",
        &[&[0, 5], &[1, 4], &[2], &[3]],
    ),
    (
        "ruby-llm-anthropic-multi-turn-streaming.yml",
        "ruby-vcr",
        &[&[0, 1, 2, 3]],
    ),
    // The cache marker moves from the first message to the newest: still one conversation.
    (
        "fantasy-anthropic-cache-control-multi-tool-streaming.yaml",
        "go-vcr",
        &[&[0, 1]],
    ),
    ("openllmetry-js-langchain-agent.har", "har", &[&[0, 1]]),
    // Two chats with the same prompt, in parallel, two turns each.
    ("ellmer-parallel-tool.yml", "ruby-vcr", &[&[0, 2], &[1, 3]]),
    // One sample's five model calls, each request extending the last.
    ("inspect-ai-browser.json", "inspect", &[&[0, 1, 2, 3, 4]]),
    // A supervisor hands one shared conversation to two agents and back, each with its
    // instructions and tools: one session per agent, each carrying the history the one before
    // handed it (the supervisor 0, 4, 8; the researcher 1, 3; the mathematician 5, 6, 7).
    // Interaction 2 is a web search.
    (
        "langgraph-agent-supervisor.msgpack.zlib",
        "vcr-msgpack",
        &[&[0, 4, 8], &[1, 3], &[5, 6, 7]],
    ),
    // Gemini generateContent, each request extending the last.
    (
        "pydantic-ai-google-instructions-only-with-tool-calls.yaml",
        "vcr-yaml",
        &[&[0, 1, 2, 3, 4]],
    ),
    // Bedrock Converse, reasoning sent back.
    (
        "pydantic-ai-bedrock-thinking-part-anthropic.yaml",
        "vcr-yaml",
        &[&[0, 1]],
    ),
    // A conversation on OpenAI Responses, then handed to Gemini: one session per API.
    (
        "pydantic-ai-google-thinking-with-tool-calls-from-other-model.yaml",
        "vcr-yaml",
        &[&[0, 1], &[2]],
    ),
    // langchain's `requests:`/`responses:` lists, gzip-compressed, streamed responses.
    (
        "langchain-anthropic-agent-loop-streaming.yaml.gz",
        "vcr-yaml",
        &[&[0, 1]],
    ),
    // LangGraph's customer-support tutorial: one conversation handed between five assistants
    // (told by their tools). The primary assistant comes back after the flight (6-12), hotel
    // (15-18) and car (21-26) assistants: each is a session of its own. It never comes back
    // after the excursion assistant (29-36), whose requests stay its session's, the change
    // read as the primary assistant's. Interaction 1 is a web search, 4 an embedding.
    (
        "langgraph-customer-support.msgpack.zlib",
        "vcr-msgpack",
        &[
            &[
                0, 2, 3, 5, 13, 14, 19, 20, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36,
            ],
            &[6, 7, 8, 9, 10, 11, 12],
            &[15, 16, 17, 18],
            &[21, 22, 23, 24, 25, 26],
        ],
    ),
    // ruby_llm replaces the system prompt between two turns of one conversation.
    (
        "ruby-llm-anthropic-system-replaced.yml",
        "ruby-vcr",
        &[&[0, 1]],
    ),
    (
        "ruby-llm-openai-system-replaced.yml",
        "ruby-vcr",
        &[&[0, 1]],
    ),
    (
        "ruby-llm-gemini-system-replaced.yml",
        "ruby-vcr",
        &[&[0, 1]],
    ),
];

pub(crate) fn kvlint(args: &[&str], out: &Path) -> (i32, String, String) {
    let mut args = args.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    let run = kvlint_fixtures::run_kvlint(env!("CARGO_BIN_EXE_kvlint"), &args);
    (run.code, run.stdout, run.stderr)
}

/// `kvlint import --format json --force PATH --out OUT`, which must succeed: its JSON report.
pub(crate) fn imported_json(path: &Path, out: &Path) -> Value {
    let (code, stdout, stderr) = kvlint(
        &[
            "import",
            "--format",
            "json",
            "--force",
            path.to_str().unwrap(),
        ],
        out,
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// `kvlint COMMAND --format json FILES…`: its exit code and JSON report.
pub(crate) fn json_of(command: &str, files: &[PathBuf]) -> (i32, Value) {
    let mut args = vec![command, "--format", "json"];
    args.extend(files.iter().map(|file| file.to_str().unwrap()));
    let run = kvlint_fixtures::run_kvlint(env!("CARGO_BIN_EXE_kvlint"), &args);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}{}", run.stdout, run.stderr));
    (run.code, report)
}

/// The bodies the reference reads from each recording, by file name; `None` without the venv.
fn reference_bodies() -> Option<Value> {
    let Some(python) = kvlint_fixtures::reference_python() else {
        kvlint_fixtures::missing_oracle(
            "the reference venv with PyYAML (the comparison with PyYAML)",
            "scripts/setup-python.sh",
        );
        return None;
    };
    let script = kvlint_fixtures::repository().join("scripts/recording_bodies.py");
    let output = Command::new(python)
        .arg(script)
        .args(EXPECTED.iter().map(|(file, ..)| recordings().join(file)))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let by_path: Value = serde_json::from_slice(&output.stdout).unwrap();
    let by_file = by_path
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, bodies)| {
            let file = Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (file, bodies.clone())
        })
        .collect();
    Some(Value::Object(by_file))
}

#[test]
fn recordings_become_sessions_with_the_bodies_sent() {
    let out = std::env::temp_dir().join(format!("kvlint-import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec!["import", "--format", "json"];
    let paths: Vec<String> = EXPECTED
        .iter()
        .map(|(file, ..)| recordings().join(file).display().to_string())
        .collect();
    args.extend(paths.iter().map(String::as_str));
    let (code, stdout, stderr) = kvlint(&args, &out);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let reference = reference_bodies();
    let mut compared = 0;
    for ((file, container, sessions), found) in EXPECTED
        .iter()
        .zip(report["recordings"].as_array().unwrap())
    {
        assert_eq!(found["container"], *container, "{file}");
        let grouped: Vec<Vec<usize>> = found["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|session| serde_json::from_value(session["interactions"].clone()).unwrap())
            .collect();
        let expected: Vec<Vec<usize>> = sessions.iter().map(|session| session.to_vec()).collect();
        assert_eq!(grouped, expected, "{file}");
        for session in found["sessions"].as_array().unwrap() {
            let bodies =
                kvlint_fixtures::written_requests(Path::new(session["file"].as_str().unwrap()));
            assert_eq!(bodies.len(), session["turns"].as_u64().unwrap() as usize);
            if let Some(reference) = &reference {
                for (body, interaction) in bodies
                    .iter()
                    .zip(session["interactions"].as_array().unwrap())
                {
                    let index = interaction.as_u64().unwrap() as usize;
                    assert_eq!(
                        *body, reference[*file][index]["body"],
                        "{file} interaction {index}"
                    );
                    compared += 1;
                }
            }
            // Each session file is one kvlint checks.
            let (code, checked) =
                json_of("check", &[PathBuf::from(session["file"].as_str().unwrap())]);
            assert!(matches!(code, 0 | 1), "{file}: {checked}");
        }
    }
    if reference.is_some() {
        let turns: usize = EXPECTED
            .iter()
            .flat_map(|(_, _, sessions)| sessions.iter().map(|session| session.len()))
            .sum();
        assert_eq!(compared, turns, "every turn compared with the reference");
    }
    // The files are there now: a second import refuses to replace them.
    let (code, stdout, _) = kvlint(&args, &out);
    assert_eq!(code, 2);
    assert!(stdout.contains("exists"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_file_that_is_not_a_recording_is_an_input_error() {
    let out = std::env::temp_dir().join(format!("kvlint-import-none-{}", std::process::id()));
    let session = kvlint_fixtures::corpus_sessions().remove(0);
    let (code, stdout, stderr) = kvlint(
        &["import", "--format", "json", session.to_str().unwrap()],
        &out,
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.contains("not a recording kvlint reads"), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn check_reads_recordings_and_places_findings_in_them() {
    let paths: Vec<PathBuf> = EXPECTED
        .iter()
        .map(|(file, ..)| recordings().join(file))
        .collect();
    let (_, report) = json_of("check", &paths);
    assert_eq!(
        report["errors"],
        serde_json::json!([]),
        "every recording reads"
    );
    // The sessions of each recording, in order, as `import` finds them.
    let mut sessions = report["sessions"].as_array().unwrap().iter();
    for (file, container, expected) in EXPECTED {
        for (number, interactions) in expected.iter().enumerate() {
            let session = sessions.next().unwrap();
            assert!(session["path"].as_str().unwrap().ends_with(file));
            let source = &session["source"];
            assert_eq!(source["container"], container);
            assert!(source["file"].as_str().unwrap().ends_with(file));
            assert_eq!(source["session"], number + 1);
            assert_eq!(source["sessions"], expected.len());
            assert_eq!(source["interactions"], serde_json::json!(interactions));
            assert_eq!(session["summary"]["turns"], interactions.len());
        }
    }
    // `render` reads them too: each session's turns.
    let (code, rendered) = json_of("render", &[recordings().join("ellmer-parallel-tool.yml")]);
    assert_eq!(code, 0, "{rendered}");
    let turns: Vec<usize> = rendered["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["turns"].as_array().unwrap().len())
        .collect();
    assert_eq!(turns, [2, 2]);
    // The same cassette gzip-compressed: the same session, by `check` and `render`.
    let compressed = recordings().join("hand-made/ruby-llm-anthropic-multi-turn-streaming.yml.gz");
    let (_, report) = json_of("check", std::slice::from_ref(&compressed));
    assert_eq!(
        report["sessions"][0]["source"]["interactions"],
        serde_json::json!([0, 1, 2, 3]),
        "{report}"
    );
    let (_, rendered) = json_of("render", &[compressed]);
    assert_eq!(
        rendered["sessions"][0]["turns"].as_array().unwrap().len(),
        4
    );
    // A hand-made cassette with a clock in the system prompt: the finding is placed at the
    // second request's body, line 10, column 11 of the cassette.
    let (code, report) = json_of(
        "check",
        &[recordings().join("hand-made/timestamp-in-system.yaml")],
    );
    assert_eq!(code, 1);
    // Its two short prompts to api.openai.com are also under OpenAI's minimum (at turn 0).
    let finding = report["sessions"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["rule"] == "volatile-timestamp")
        .unwrap();
    assert_eq!(finding["turn"], 1);
    assert_eq!(
        (&finding["span"]["line"], &finding["span"]["column"]),
        (&serde_json::json!(10), &serde_json::json!(11))
    );
}

/// A real Inspect run against the tests' llama-server (`scripts/inspect_eval_log.py`), as the
/// `.eval` zip Inspect writes and as JSON: each model call's request, its messages taken back
/// from the sample's pool, is the one inspect_ai's own reader gives back
/// (`agent.expected.jsonl`), and the two samples are two sessions.
#[test]
fn inspect_logs_give_the_requests_inspect_reads_back() {
    let folder = recordings().join("inspect");
    let expected: Vec<Value> = std::fs::read_to_string(folder.join("agent.expected.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for log in ["agent.eval", "agent.json"] {
        let out = std::env::temp_dir().join(format!("kvlint-import-{log}-{}", std::process::id()));
        let path = folder.join(log);
        let report = imported_json(&path, &out);
        let sessions = report["recordings"][0]["sessions"].as_array().unwrap();
        let grouped: Vec<Value> = sessions
            .iter()
            .map(|session| session["interactions"].clone())
            .collect();
        assert_eq!(
            grouped,
            [serde_json::json!([0, 1, 2]), serde_json::json!([3, 4, 5])],
            "{log}"
        );
        let bodies: Vec<Value> = sessions
            .iter()
            .flat_map(|session| {
                kvlint_fixtures::written_requests(Path::new(session["file"].as_str().unwrap()))
            })
            .collect();
        assert_eq!(bodies, expected, "{log}");
        // Checked raw: each sample's calls extend the one before.
        let (code, checked) = json_of("check", &[path]);
        assert!(matches!(code, 0 | 1), "{checked}");
        assert_eq!(checked["sessions"].as_array().unwrap().len(), 2, "{log}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A folder of cassettes is checked as it is: every recording under it is found.
#[test]
fn check_finds_the_recordings_of_a_folder() {
    let (code, report) = json_of("check", &[recordings()]);
    assert!(matches!(code, 0 | 1), "{report}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let paths: Vec<&str> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["path"].as_str().unwrap())
        .collect();
    for (file, _, sessions) in EXPECTED {
        let found = paths.iter().filter(|path| path.ends_with(file)).count();
        assert_eq!(found, sessions.len(), "{file}");
    }
    for made_here in [
        "inspect/agent.eval",
        "otel/genai.json",
        "hand-made/timestamp-in-system.yaml",
    ] {
        assert!(
            paths.iter().any(|path| path.ends_with(made_here)),
            "{made_here}"
        );
    }
}
