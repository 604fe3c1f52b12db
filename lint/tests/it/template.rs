//! `kvlint template` on what real templates do: a time of day in a chat template, placeholder
//! special tokens for a bare Jinja file, errors that name the line, and a per-session value
//! before the shared instructions of a prompt template.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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
