//! Property-based fuzzing of what reads hostile input: the session parser (on mutated real
//! sessions and on arbitrary text), the request model (on arbitrary JSON bodies), the whole
//! check, the prompt-template scanner and syntax check, and the chat-template renderer (on
//! templates built from loops, recursion and growing values, under tight limits). Every input must end in a result or a typed error
//! with its place, never a panic. A bounded number of cases runs in the test command
//! (`KVLINT_FUZZ_CASES` raises it for a longer campaign); a failure found is kept as a
//! regression case in `rules/tests/fuzz.proptest-regressions`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kvlint_core::SessionFile;
use kvlint_core::prompt_template::{TemplateSyntax, check_prompt_template, check_template_syntax};
use kvlint_render::ChatTemplate;
use kvlint_render::Renderer;
use kvlint_render::TemplateLimits;
use kvlint_render::Tokenizer;
use kvlint_request::Request;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn cases() -> u32 {
    std::env::var("KVLINT_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(2000)
}

/// Real sessions of the fixtures, each a seed for mutations.
fn seeds() -> Vec<String> {
    let root = kvlint_fixtures::root();
    [
        "examples/coding-agent.jsonl",
        "diff/before.json",
        "rules/tool-order/fail",
        "rules/history-rewrite/fail",
        "rules/cache-breakpoint",
    ]
    .iter()
    .flat_map(|relative| {
        let path = root.join(relative);
        if path.is_file() {
            vec![path]
        } else {
            walk(&path)
        }
    })
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .collect()
}

fn walk(folder: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else if path
            .extension()
            .is_some_and(|extension| extension == "jsonl")
        {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// One edit of a text: replace, insert or delete a few bytes at a place.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, String),
    Insert(usize, String),
    Delete(usize, usize),
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    // Characters that matter to JSON and to the request model, and some that do not.
    let pieces = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        "\"",
        ",",
        ":",
        "\\",
        "\\u",
        "null",
        "0",
        "-1e999",
        "\n",
        " ",
        "é",
        "\u{202e}",
        "\u{1b}",
        "\u{feff}",
        "\"role\"",
        "\"content\"",
        "\"messages\"",
        "\"tools\"",
        "\"type\"",
        "\"text\"",
        "\"tool_calls\"",
        "\"input\"",
        "\"system\"",
        "[]",
        "{}",
    ]);
    prop_oneof![
        (any::<usize>(), pieces.clone()).prop_map(|(at, piece)| Edit::Replace(at, piece.into())),
        (any::<usize>(), pieces).prop_map(|(at, piece)| Edit::Insert(at, piece.into())),
        (any::<usize>(), 1..40usize).prop_map(|(at, length)| Edit::Delete(at, length)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut text = text.to_owned();
    for edit in edits {
        let boundary = |at: usize, text: &str| {
            let mut at = at % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        };
        match edit {
            Edit::Replace(at, piece) => {
                let start = boundary(*at, &text);
                let end = text[start..]
                    .chars()
                    .next()
                    .map_or(start, |character| start + character.len_utf8());
                text.replace_range(start..end, piece);
            }
            Edit::Insert(at, piece) => {
                let at = boundary(*at, &text);
                text.insert_str(at, piece);
            }
            Edit::Delete(at, length) => {
                let start = boundary(*at, &text);
                let end = boundary(start + length, &text).max(start);
                text.replace_range(start..end, "");
            }
        }
    }
    text
}

/// Parses and, when it parses, checks: the result is a report or an error with its place.
fn parse_and_check(text: String) {
    match SessionFile::parse("fuzz.jsonl".into(), Arc::from(text)) {
        Ok(session) => {
            if let Err(error) = kvlint_rules::check_session(&session, &Renderer::provider(), None) {
                assert_eq!(error.path(), "fuzz.jsonl");
            }
        }
        Err(error) => assert_eq!(error.path(), "fuzz.jsonl"),
    }
}

/// JSON values shaped like request bodies: objects with the keys the request model reads.
fn body_strategy() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "messages",
        "role",
        "content",
        "tools",
        "type",
        "text",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "input",
        "instructions",
        "system",
        "tool_use_id",
        "cache_control",
        "id",
        "reasoning_content",
        "thinking",
        "image_url",
        "parameters",
        "input_schema",
        "call_id",
        "output",
        "tool_choice",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "system",
            "developer",
            "tool",
            "function",
            "text",
            "tool_use",
            "tool_result",
            "message",
            "function_call",
            "",
            "{\"a\":1}",
            "not json",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(3),
        Just(1000),
        Just(100_000),
        Just(1 << 40)
    ]
}

/// Templates of hostile and ordinary Jinja: loops of loops, recursion, values that grow,
/// filters with huge arguments, and stray text.
fn jinja_template() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("{% set ns.s = ns.s ~ ns.s %}".to_owned()),
        Just("{% set _ = ns.items.append(ns.s) %}".to_owned()),
        Just("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}".to_owned()),
        count().prop_map(|n| format!("{{{{ messages | tojson(indent={n}) }}}}")),
        count().prop_map(|n| format!("{{{{ 'x' * {n} }}}}")),
        count().prop_map(|n| format!("{{{{ messages[0].content | indent({n}) }}}}")),
        Just("{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}".to_owned()),
        Just("{{ strftime_now('%Y') }}{{ raise_exception('no') if not messages }}".to_owned()),
        "[a-z{}%<>|\\n ]{0,12}",
    ];
    let body = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (count(), prop::collection::vec(inner.clone(), 1..4)).prop_map(|(n, body)| {
                format!("{{% for i in range({n}) %}}{}{{% endfor %}}", body.concat())
            }),
            prop::collection::vec(inner.clone(), 1..4)
                .prop_map(|body| format!("{{% if messages %}}{}{{% endif %}}", body.concat())),
            prop::collection::vec(inner, 1..4).prop_map(|body| body.concat()),
        ]
    });
    body.prop_map(|body| format!("{{% set ns = namespace(s='ab', items=[]) %}}{body}"))
}

fn render_bounded(source: &str) {
    let path = std::env::temp_dir().join(format!(
        "kvlint-fuzz-template-{}-{:?}.jinja",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, source).unwrap();
    let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
        .and_then(|date| date.and_hms_opt(10, 0, 0))
        .unwrap();
    if let Ok(template) = ChatTemplate::from_file(&path, now) {
        let limits = TemplateLimits {
            fuel: 200_000,
            ..TemplateLimits::default()
        };
        let messages = [serde_json::json!({"role": "user", "content": "hi\nthere"})];
        let _ = template.with_limits(limits).render(&messages, None, true);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn keys_given_twice_are_all_found(pairs in prop::collection::vec(("[ab\\\\\"é]{0,2}", body_strategy()), 0..8)) {
        // An object written by hand, keys in the order given, escaped as serde writes them.
        let members: Vec<String> = pairs
            .iter()
            .map(|(key, value)| format!("{}: {value}", serde_json::to_string(key).unwrap()))
            .collect();
        let text = format!("{{{}}}", members.join(", "));
        let expected = pairs
            .iter()
            .enumerate()
            .filter(|(index, (key, _))| pairs[..*index].iter().any(|(earlier, _)| earlier == key))
            .count();
        let found = kvlint_core::duplicate_keys::duplicate_keys(&text);
        prop_assert_eq!(found.iter().filter(|duplicate| duplicate.object.is_empty()).count(), expected, "{}", text);
    }

    #[test]
    fn chat_templates_end_within_their_limits(source in jinja_template()) {
        render_bounded(&source);
    }

    #[test]
    fn mutated_sessions_never_panic(seed in 0..64usize, edits in prop::collection::vec(edit_strategy(), 1..6)) {
        let seeds = seeds();
        prop_assume!(!seeds.is_empty());
        parse_and_check(apply(&seeds[seed % seeds.len()], &edits));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        parse_and_check(text);
    }

    #[test]
    fn arbitrary_bodies_never_panic(body in body_strategy()) {
        if let Ok(request) = Request::from_body(&body) {
            let line = serde_json::to_string(&body).unwrap();
            // A body the request model reads is checked whole, turn against itself.
            parse_and_check(format!("{line}\n{line}\n"));
            let _ = Renderer::provider().render(&request);
        }
    }

    #[test]
    fn prompt_templates_never_panic(text in "(\\{\\{?[#/^!~]?[a-z_ ]{0,12}\\}?\\}|\\{%[a-z ]{0,12}%\\}|---\n|[a-z :\\[\\]{}\n]{0,20}){0,30}") {
        let tokenizer = Tokenizer::o200k_base();
        for syntax in [TemplateSyntax::Braces, TemplateSyntax::Format] {
            let _ = check_prompt_template(&text, syntax, &["turn".to_owned()], &tokenizer);
        }
        for path in ["t.mustache", "t.hbs", "t.dotprompt", "t.prompty"] {
            let _ = check_template_syntax(path, &text);
        }
    }
}
