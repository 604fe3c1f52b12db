//! `kvlint template` on what real templates do: a time of day in a chat template, placeholder
//! special tokens for a bare Jinja file, errors that name the line, and a per-session value
//! before the shared instructions of a prompt template.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use kvlint_fixtures::Printed as Run;

/// Runs kvlint from the repository root; stdout and stderr together.
fn kvlint(args: &[&str]) -> Run {
    kvlint_fixtures::run_kvlint_printed(env!("CARGO_BIN_EXE_kvlint"), args)
}

#[test]
fn a_session_id_before_shared_instructions_is_a_warning() {
    let run = kvlint(&[
        "template",
        "--format",
        "json",
        "fixtures/templates/prompts/session.j2",
        "fixtures/templates/prompts/session-fixed.j2",
    ]);
    assert_eq!(run.code, 0, "warnings only: {}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let finding = &report["templates"][0]["findings"][0];
    assert_eq!(finding["rule"], "volatile-id");
    assert_eq!(finding["severity"], "warning");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains("`session_id` differs per session")
            && message.contains("every new session prefills them again"),
        "{message}"
    );
    assert_eq!(report["templates"][1]["findings"], serde_json::json!([]));
}

#[test]
fn a_time_of_day_in_a_chat_template_breaks_every_request() {
    let run = kvlint(&[
        "template",
        "--format",
        "json",
        "--now",
        "2026-11-29T10:00:00",
        "fixtures/templates/clock-in-first-message.jinja",
    ]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let findings = report["templates"][0]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!(finding["rule"], "volatile-timestamp");
    assert_eq!(finding["severity"], "error");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains("the time of day (`strftime_now('%Y-%m-%d %H:%M:%S')`)")
            && message.contains("every request")
            && !message.contains("midnight"),
        "{message}"
    );
    // The template calls strftime_now itself: no template variable can pin the time.
    let help = finding["help"].as_str().unwrap();
    assert!(!help.contains("chat_template_kwargs"), "{help}");
    assert_eq!(finding["span"]["line"], 6);
    assert_eq!(finding["span"]["column"], 46);
}

#[test]
fn a_bare_chat_template_renders_with_named_placeholder_tokens_and_errors_name_the_line() {
    let folder = std::env::temp_dir().join(format!("kvlint-bare-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let bare = folder.join("bare.jinja");
    std::fs::write(
        &bare,
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}{{ eos_token }}{% endfor %}",
    )
    .unwrap();
    let run = kvlint(&["template", "--format", "json", bare.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let notes = report["templates"][0]["notes"].to_string();
    assert!(
        notes.contains("`bos_token` as `<kvlint-placeholder:bos_token>`")
            && notes.contains("`eos_token` as `<kvlint-placeholder:eos_token>`"),
        "{notes}"
    );
    let human = kvlint(&["template", bare.to_str().unwrap()]);
    assert!(
        human.stdout.contains("note: ") && human.stdout.contains("placeholder special tokens"),
        "{}",
        human.stdout
    );

    let broken = folder.join("broken.jinja");
    std::fs::write(
        &broken,
        "{% for m in messages %}\n{{ m.content.frobnicate() }}\n{% endfor %}",
    )
    .unwrap();
    let run = kvlint(&["template", broken.to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(
        run.stdout.contains("line 2")
            && run.stdout.contains("frobnicate")
            && run.stdout.contains("{{ m.content.frobnicate() }}"),
        "{}",
        run.stdout
    );
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn a_folder_without_templates_says_so() {
    let run = kvlint(&["template", "fixtures/diff"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stdout.contains("no templates found in fixtures/diff"),
        "{}",
        run.stdout
    );
}

#[test]
fn template_check_finds_the_date_and_passes_a_stable_template() {
    let run = kvlint(&[
        "template",
        "--format",
        "json",
        "--now",
        "2026-11-29T10:00:00",
        "fixtures/templates/dated.jinja",
    ]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let finding = &report["templates"][0]["findings"][0];
    assert_eq!(finding["rule"], "volatile-timestamp");
    assert_eq!(finding["severity"], "error");
    assert!(
        finding["previous_window"]
            .as_str()
            .unwrap()
            .contains("2026-11-29")
    );
    assert!(
        finding["current_window"]
            .as_str()
            .unwrap()
            .contains("2026-11-30")
    );

    let run = kvlint(&["template", "fixtures/templates/stable.jinja"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("stable.jinja: 0 errors, 0 warnings, 0 info"),
        "{}",
        run.stdout
    );

    let run = kvlint(&["template", "fixtures/templates/missing.jinja"]);
    assert_eq!(run.code, 2);
}

#[test]
fn prompt_templates_with_volatile_variables_before_stable_text() {
    let run = kvlint(&["template", "--format", "json", "fixtures/templates/prompts"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let mut found: Vec<(String, String, u64, u64)> = Vec::new();
    for template in report["templates"].as_array().unwrap() {
        assert_eq!(template["kind"], "prompt");
        for finding in template["findings"].as_array().unwrap() {
            let name = Path::new(template["path"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            found.push((
                name,
                finding["rule"].as_str().unwrap().to_owned(),
                finding["span"]["line"].as_u64().unwrap(),
                finding["span"]["column"].as_u64().unwrap(),
            ));
        }
    }
    let expected = [
        ("agent.prompt", "volatile-id", 1, 9),
        ("agent.prompt", "volatile-counter", 1, 51),
        // Jinja that names messages, roles and special tokens without rendering a conversation.
        ("message-fields.j2", "volatile-id", 3, 5),
        ("messages-in-prose.j2", "volatile-id", 1, 9),
        ("session.j2", "volatile-id", 1, 9),
        ("support.j2", "volatile-timestamp", 1, 55),
        ("triage.prompty", "volatile-timestamp", 8, 20),
    ];
    let expected: Vec<(String, String, u64, u64)> = expected
        .iter()
        .map(|(file, rule, line, column)| ((*file).into(), (*rule).into(), *line, *column))
        .collect();
    assert_eq!(
        found, expected,
        "support-fixed.j2 puts the time last and session-fixed.j2 the session id: both are clean"
    );
}

#[test]
fn prompt_template_ignores_and_configured_volatile_names() {
    let folder = std::env::temp_dir().join(format!("kvlint-prompts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("a.j2"),
        "{# kvlint: ignore[volatile-timestamp] #}Now: {{ now }}. Be brief and cite sources.\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("b.j2"),
        "Memory: {{ memory }}\nBe brief and cite sources.\n",
    )
    .unwrap();
    let run = |folder: &Path| {
        let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
            .args(["template", "."])
            .current_dir(folder)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    assert_eq!(
        run(&folder).0,
        Some(0),
        "the ignore comment silences a.j2; `memory` is not known to change"
    );
    std::fs::write(folder.join("kvlint.toml"), "volatile = [\"memory\"]\n").unwrap();
    let (code, output) = run(&folder);
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("`memory` changes every turn"), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}

#[test]
fn template_findings_in_ci_formats() {
    let github = kvlint(&[
        "template",
        "--format",
        "github",
        "fixtures/templates/prompts/support.j2",
    ]);
    assert_eq!(github.code, 1);
    insta::assert_snapshot!(github.stdout);
    let sarif = kvlint(&[
        "template",
        "--format",
        "sarif",
        "fixtures/templates/prompts/support.j2",
    ]);
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "volatile-timestamp");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        1
    );
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startColumn"],
        55
    );
    let junit = kvlint(&[
        "template",
        "--format",
        "junit",
        "fixtures/templates/prompts/support-fixed.j2",
    ]);
    assert_eq!(junit.code, 0);
    assert!(junit.stdout.contains("failures=\"0\""), "{}", junit.stdout);
}
