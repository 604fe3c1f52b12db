//! The template check renders what transformers renders: every real template of llama.cpp's
//! collection, on the conversation variant the check chose for it (every turn), on the full
//! conversation (which the check refuses exactly when Jinja2 refuses it) and without a system
//! message, rendered by kvlint and by transformers itself (`scripts/reference_render.py`).
//!
//! Lists may change in place in both (`allow_list_mutation`): transformers' sandbox refuses
//! it (see `engine.rs`), Jinja2 and llama.cpp do not, and the check renders those templates.
//!
//! Needs the assets of `scripts/fetch-assets.sh` and the venv of `scripts/setup-python.sh`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use kvlint_render::template::{ChatTemplate, placeholder};
use kvlint_render::template_check::{Feature, TemplateNote, Variant, check_template, turn_lengths};
use serde_json::{Map, Value, json};

fn now() -> NaiveDateTime {
    NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap()
}

/// One rendering both sides make.
struct Case {
    id: String,
    template: PathBuf,
    messages: Vec<Value>,
    tools: Vec<Value>,
    kwargs: Map<String, Value>,
    ours: Result<String, String>,
}

/// The template as the check renders it: Qwen3's special tokens (those transformers passes
/// with the Qwen3 tokenizer), placeholders for the rest it reads, and placeholders for the
/// variables the check found missing.
fn cases_of(path: &Path, qwen3: &Path) -> Vec<Case> {
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let mut template = ChatTemplate::from_file(path, now())
        .and_then(|template| template.with_special_tokens_from(qwen3))
        .unwrap()
        .with_placeholder_special_tokens();
    let check = check_template(&template, now());
    let mut kwargs = Map::new();
    for token in template.placeholder_tokens() {
        kwargs.insert(token.clone(), json!(placeholder(token)));
    }
    let variant = match &check {
        Ok(check) => {
            for note in &check.notes {
                if let TemplateNote::PlaceholderVariables(names)
                | TemplateNote::PlaceholderTokens(names) = note
                {
                    for name in names {
                        template
                            .kwargs
                            .insert(name.clone(), json!(placeholder(name)));
                        kwargs.insert(name.clone(), json!(placeholder(name)));
                    }
                }
            }
            Some(check.variant.clone())
        }
        Err(_) => None,
    };
    let mut renderings: Vec<(String, Vec<Value>, Vec<Value>)> = Vec::new();
    let (full, tools) = Variant::default().conversation();
    renderings.push(("full".into(), full, tools));
    if let Some(variant) = &variant {
        let (messages, tools) = variant.conversation();
        for length in turn_lengths(&messages) {
            renderings.push((
                format!("{variant:?} turn of {length}"),
                messages[..length].to_vec(),
                tools.clone(),
            ));
        }
        if variant.has(Feature::SystemMessage) {
            let (messages, tools) = variant.without(Feature::SystemMessage).conversation();
            let first = turn_lengths(&messages)[0];
            renderings.push((
                "no system message".into(),
                messages[..first].to_vec(),
                tools,
            ));
        }
    }
    renderings
        .into_iter()
        .map(|(label, messages, tools)| Case {
            id: format!("{name} [{label}]"),
            template: path.to_owned(),
            ours: template
                .render(&messages, Some(&tools), true)
                .map_err(|error| error.to_string()),
            messages,
            tools,
            kwargs: kwargs.clone(),
        })
        .collect()
}

fn reference(cases: &[Case], tokenizer_dir: &Path) -> Vec<Value> {
    let input: Vec<Value> = cases
        .iter()
        .map(|case| {
            json!({
                "id": case.id,
                "tokenizer_dir": tokenizer_dir,
                "chat_template_file": case.template,
                "messages": case.messages,
                "tools": case.tools,
                "add_generation_prompt": true,
                "kwargs": case.kwargs,
                "now": "2026-11-29T10:00:00",
                "allow_list_mutation": true,
            })
        })
        .collect();
    kvlint_fixtures::transformers_render(&input).unwrap()
}

#[test]
fn the_check_renders_what_transformers_renders() {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let qwen3 = assets.join("tokenizers/qwen3");
    let mut templates: Vec<PathBuf> = std::fs::read_dir(assets.join("templates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    templates.sort();
    let cases: Vec<Case> = templates
        .iter()
        .flat_map(|path| cases_of(path, &qwen3.join("tokenizer_config.json")))
        .collect();
    let references = reference(&cases, &qwen3);
    assert_eq!(references.len(), cases.len());
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (case, reference) in cases.iter().zip(&references) {
        let expected = reference.get("text").and_then(Value::as_str);
        match (&case.ours, expected) {
            (Ok(ours), Some(expected)) => {
                compared += 1;
                if ours != expected && !escapes_markup_sums(case, ours, expected) {
                    let at = ours
                        .bytes()
                        .zip(expected.bytes())
                        .take_while(|(a, b)| a == b)
                        .count();
                    let context = |text: &str| {
                        text.get(at.saturating_sub(30)..(at + 40).min(text.len()))
                            .unwrap_or("")
                            .to_owned()
                    };
                    mismatches.push(format!(
                        "{}: differs at byte {at}: ours {:?} vs transformers {:?}",
                        case.id,
                        context(ours),
                        context(expected)
                    ));
                }
            }
            (Err(_), None) => {}
            (Ok(_), None) => {
                // Jinja2 alone raises when a `for` loops over None and when `tojson` meets a
                // generator (minijinja loops zero times; its filters return lists).
                let error = reference["error"].as_str().unwrap_or_default();
                let python_only = error.contains("'NoneType' object is not iterable")
                    || error.contains("Object of type generator is not JSON serializable");
                if !python_only {
                    mismatches.push(format!(
                        "{}: transformers failed ({error}) but kvlint rendered",
                        case.id
                    ));
                }
            }
            (Err(error), Some(_)) => {
                mismatches.push(format!("{}: kvlint failed: {error}", case.id));
            }
        }
    }
    assert!(compared >= 300, "only {compared} renderings compared");
    assert!(
        mismatches.is_empty(),
        "{} of {} renderings differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

/// The one known difference: Jinja2 HTML-escapes a string added (`+`) to a `|safe` one
/// (`Markup.__add__`), even with auto-escaping off; minijinja escapes such sums only when
/// auto-escaping is on, which would also escape every output. Functionary v3.1 writes its
/// tool list that way. Accepted when the template adds to a `|safe` string and the texts
/// differ by nothing but those escapes.
fn escapes_markup_sums(case: &Case, ours: &str, expected: &str) -> bool {
    let source = std::fs::read_to_string(&case.template).unwrap();
    let adds_to_safe = regex::Regex::new(r"\|\s*safe\s*\+")
        .unwrap()
        .is_match(&source);
    let unescaped = expected
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    adds_to_safe && unescaped == ours
}
