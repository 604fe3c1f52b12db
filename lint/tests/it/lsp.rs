//! `kvlint lsp` keeps a session file's diagnostics right as it is edited: after every edit,
//! what it publishes for the edited document (analysed again from the turn before the edit)
//! equals what it publishes for the same text opened fresh (analysed whole), through edits
//! that break a turn, repair it, add turns and make the file unparseable for a while; and it
//! answers hostile requests (positions past the end, backward ranges, wrong shapes, unknown
//! methods) without stopping.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::lsp_client;

use lsp_client::Server;
use lsp_server::{Message, Request, RequestId};
use serde_json::{Value, json};

/// The protocol position of byte `offset` (UTF-16 units).
fn position(text: &str, offset: usize) -> Value {
    let line_start = text[..offset].rfind('\n').map_or(0, |newline| newline + 1);
    json!({
        "line": text[..offset].matches('\n').count(),
        "character": text[line_start..offset].chars().map(char::len_utf16).sum::<usize>(),
    })
}

/// The `occurrence`-th place of `word` on line `line` (0-based) of `text`.
fn word_on_line(text: &str, line: usize, word: &str, occurrence: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    let line_text = text[start..].split('\n').next().unwrap();
    start
        + line_text
            .match_indices(word)
            .nth(occurrence)
            .unwrap_or_else(|| panic!("no {word} #{occurrence} on line {line}"))
            .0
}

#[test]
fn edits_are_analysed_as_the_whole_file_would_be() {
    let mut text = kvlint_fixtures::agent_session_jsonl(24);
    let dir = std::env::temp_dir().join(format!("kvlint-lsp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let uri = format!("file://{}/session.jsonl", dir.display());
    let mut server = Server::start();
    assert!(server.open(&uri, &text).is_empty(), "a clean session");

    // (line, word, occurrence on the line, replacement): history rewritten in late and early
    // turns, a system prompt edited, the edit repaired, a line's JSON broken and mended.
    let edits: &[(usize, &str, usize, &str)] = &[
        (20, "cache", 3, "CACHE"),
        (22, "parser", 1, "lexer"),
        (5, "tokens", 0, "words"),
        (22, "lexer", 0, "parser"),
        (12, "\"role\"", 0, "\"role"),
        (12, "\"role", 0, "\"role\""),
        (23, "backoff", 2, "backoff and jitter"),
        (1, "error", 0, "fault"),
    ];
    let mut version = 0;
    let mut reference = 0;
    let mut findings_seen = Vec::new();
    let mut unparsable_seen = false;
    for (line, word, occurrence, replacement) in edits {
        let at = word_on_line(&text, *line, word, *occurrence);
        let end = at + word.len();
        let change = json!({"range": {"start": position(&text, at), "end": position(&text, end)},
                            "text": replacement});
        text.replace_range(at..end, replacement);
        version += 1;
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}),
        );
        let edited = server.diagnostics(&uri, version);
        // The same text, opened as another document: analysed whole.
        reference += 1;
        let fresh_name = format!("fresh-{reference}.jsonl");
        let fresh_uri = format!("file://{}/{fresh_name}", dir.display());
        let fresh = server.open(&fresh_uri, &text);
        let comparable = |diagnostics: &[Value], name: &str| -> Vec<Value> {
            diagnostics
                .iter()
                .map(|diagnostic| {
                    let mut diagnostic = diagnostic.clone();
                    if let Some(related) = diagnostic["relatedInformation"].as_array_mut() {
                        for information in related {
                            information["location"]["uri"] = Value::Null;
                        }
                    }
                    let message = diagnostic["message"]
                        .as_str()
                        .unwrap()
                        .replace(name, "FILE");
                    diagnostic["message"] = message.into();
                    diagnostic
                })
                .collect()
        };
        assert_eq!(
            comparable(&edited, "session.jsonl"),
            comparable(&fresh, &fresh_name),
            "after replacing {word} on line {line}"
        );
        server.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": fresh_uri}}),
        );
        findings_seen.push(
            edited
                .iter()
                .filter(|diagnostic| diagnostic["code"].is_string())
                .count(),
        );
        unparsable_seen |= edited
            .iter()
            .any(|diagnostic| diagnostic["code"].is_null() && diagnostic["severity"] == 1);
    }
    // Breaks were found from the first edit on, the broken line was reported, and the last
    // edits (an early turn's history) left more breaks than the first.
    assert!(findings_seen[0] > 0, "{findings_seen:?}");
    assert!(unparsable_seen);
    assert!(
        findings_seen[findings_seen.len() - 1] > findings_seen[0],
        "{findings_seen:?}"
    );
    server.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hostile_requests_get_answers_not_crashes() {
    let mut server = Server::start();
    let uri = "file:///nowhere/prompt.j2";
    let text = "Now: {{ now }}\nYou are the support assistant. Be brief.\n";
    assert_eq!(server.open(uri, text).len(), 1);
    let far = json!({"line": u32::MAX, "character": u32::MAX});
    let requests = [
        // Positions past the end, a range that ends before it starts.
        (
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": far}),
        ),
        (
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri},
                   "range": {"start": far, "end": {"line": 0, "character": 0}},
                   "context": {"diagnostics": "not a list"}}),
        ),
        // A document that is not open, parameters of the wrong shape, a method it lacks.
        (
            "textDocument/diagnostic",
            json!({"textDocument": {"uri": "file:///nowhere/else.jsonl"}}),
        ),
        ("textDocument/hover", json!({"textDocument": 7})),
        ("textDocument/definition", json!({})),
    ];
    let mut answers = Vec::new();
    for (index, (method, params)) in requests.into_iter().enumerate() {
        let id = RequestId::from(100 + index as i32);
        server.send(Request::new(id.clone(), method.to_owned(), params).into());
        loop {
            if let Message::Response(response) = server.receive()
                && response.id == id
            {
                answers.push(response);
                break;
            }
        }
    }
    // `null`: nothing at the end.
    assert!(
        answers[0].error.is_none() && answers[0].result.is_none(),
        "{:?}",
        answers[0]
    );
    assert!(answers[1].error.is_none(), "{:?}", answers[1]);
    assert!(
        answers[2].result.as_ref().unwrap()["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(answers[3].error.as_ref().unwrap().code, -32602);
    assert_eq!(answers[4].error.as_ref().unwrap().code, -32601);
    // Edits with ranges past the end and backwards are applied where they can be.
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 1}, "contentChanges": [
            {"range": {"start": far, "end": far}, "text": "\nAppended."},
            {"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 1}}, "text": "é🕒"},
        ]}),
    );
    let diagnostics = server.diagnostics(uri, 1);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    // "Nowé🕒: {{ now }}": the placeholder (at 5) moved by three UTF-16 units.
    assert_eq!(
        diagnostics[0]["range"]["start"],
        json!({"line": 0, "character": 8})
    );
    server.stop();
}

/// A rule fixture's session (`RULE/fail/NAME.jsonl`), opened: its URI, its text and the
/// diagnostics published for it.
fn open_fixture(server: &mut Server, fixture: &str) -> (String, String, Vec<Value>) {
    let path = kvlint_fixtures::repository()
        .join("fixtures/rules")
        .join(fixture);
    let text = std::fs::read_to_string(path).unwrap();
    let uri = format!("file:///nowhere/{}", fixture.replace('/', "-"));
    let diagnostics = server.open(&uri, &text);
    (uri, text, diagnostics)
}

/// The turn of the fixture's first expected finding, as its `.expect.json` (the JSON report's
/// numbering) says.
fn expected_turn(fixture: &str) -> u64 {
    let expect = kvlint_fixtures::repository()
        .join("fixtures/rules")
        .join(fixture.replace(".jsonl", ".expect.json"));
    let expect: Value = serde_json::from_str(&std::fs::read_to_string(expect).unwrap()).unwrap();
    expect["findings"][0]["turn"].as_u64().unwrap()
}

#[test]
fn turns_are_counted_as_the_json_report_counts_them_and_the_earlier_turn_points_at_its_change() {
    let fixture = "volatile-timestamp/fail/system-date-midnight.jsonl";
    let turn = expected_turn(fixture);
    let mut server = Server::start();
    let (uri, text, diagnostics) = open_fixture(&mut server, fixture);
    let [found] = diagnostics.as_slice() else {
        panic!("{diagnostics:?}");
    };
    // Turn N is line N+1 of a session file: the earlier turn's line, and the first byte where
    // it differs from the later turn's.
    let lines: Vec<&str> = text.split('\n').collect();
    let (earlier, later) = (lines[turn as usize - 1], lines[turn as usize]);
    let first_difference = earlier
        .bytes()
        .zip(later.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let earlier_start = text.find(earlier).unwrap();
    let related = &found["relatedInformation"][0];
    assert_eq!(
        related["location"]["range"]["start"],
        position(&text, earlier_start + first_difference)
    );
    assert_ne!(
        related["location"]["range"]["start"], related["location"]["range"]["end"],
        "the changed bytes, not a point"
    );
    assert!(
        related["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("turn {}:", turn - 1)),
        "{related}"
    );
    let id = RequestId::from(50);
    server.send(
        Request::new(
            id.clone(),
            "textDocument/hover".to_owned(),
            json!({"textDocument": {"uri": uri}, "position": found["range"]["start"]}),
        )
        .into(),
    );
    let hover = loop {
        if let Message::Response(response) = server.receive()
            && response.id == id
        {
            break response.result.unwrap()["contents"]["value"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    };
    assert!(
        hover.contains(&format!("turn {} (cached)", turn - 1))
            && hover.contains(&format!("turn {turn} (sent)")),
        "{hover}"
    );
    server.stop();
}

#[test]
fn a_line_broken_while_typing_keeps_the_earlier_turns_findings() {
    // (fixture, what the line after the break's loses, the line the parser stops on, counted
    // from that line): the quote that closes its first key, where it stops on that line; its
    // last character (""), the closing brace, where it runs into the next line.
    let cases = [
        (
            "volatile-timestamp/fail/system-date-midnight.jsonl",
            "\":",
            0,
        ),
        ("tool-order/fail/mcp-hashmap-swap.jsonl", "", 1),
    ];
    for (fixture, lost, stops_after) in cases {
        let line = expected_turn(fixture) as usize + 1;
        let mut server = Server::start();
        let (uri, mut text, diagnostics) = open_fixture(&mut server, fixture);
        let above: Vec<&Value> = diagnostics
            .iter()
            .filter(|diagnostic| diagnostic["range"]["start"]["line"].as_u64() < Some(line as u64))
            .collect();
        assert!(!above.is_empty(), "{fixture}: {diagnostics:?}");
        let at = if lost.is_empty() {
            word_on_line(&text, line + 1, "{", 0) - 2
        } else {
            word_on_line(&text, line, lost, 0)
        };
        let change = json!({"range": {"start": position(&text, at), "end": position(&text, at + 1)},
                            "text": ""});
        text.replace_range(at..at + 1, "");
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": 1}, "contentChanges": [change]}),
        );
        let edited = server.diagnostics(&uri, 1);
        let (findings, problems): (Vec<&Value>, Vec<&Value>) = edited
            .iter()
            .partition(|diagnostic| diagnostic["code"].is_string());
        assert_eq!(
            findings, above,
            "{fixture}: the earlier turns' findings, unchanged"
        );
        let [problem] = problems.as_slice() else {
            panic!("{fixture}: {edited:?}");
        };
        assert_eq!(
            problem["range"]["start"]["line"],
            line + stops_after,
            "{fixture}: {problem}"
        );
        server.stop();
    }
}

#[test]
fn exit_without_shutdown_exits_1() {
    let status = Server::start().exit_without_shutdown();
    assert_eq!(status.code(), Some(1));
    // With `shutdown` first, 0 (`stop` asserts it).
    Server::start().stop();
}
