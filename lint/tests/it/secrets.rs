//! No secret out: with sentinel keys in the environment and in fields named like secrets in the
//! inputs, no output of any command in any format prints one — findings, errors with their
//! excerpts, reports, refusals alike. The probe's own handling of keys (each to its provider's
//! header only, server echoes redacted) is tested in `probe_faults.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

const OPENAI: &str = "sk-sentinel-env-openai-5d1e";
const ANTHROPIC: &str = "sk-ant-sentinel-env-2b7f";
const KVLINT: &str = "sentinel-env-kvlint-9a0c";
const IN_BODY: &str = "sk-sentinel-body-44aa";
const IN_HEADER: &str = "Bearer sentinel-header-c3d9";
const PASSWORD: &str = "sentinel-password-6e21";

/// Sessions whose bodies carry secrets in fields named like secrets, next to a break, a bad
/// value and invalid JSON, so that findings and errors show the lines that hold them.
fn inputs(folder: &Path) -> Vec<PathBuf> {
    let body = |system: &str, extra: &str| {
        format!(
            r#"{{"model":"gpt-4o","api_key":"{IN_BODY}","metadata":{{"password":"{PASSWORD}","authorization":"{IN_HEADER}"}},"messages":[{{"role":"system","content":"{system}"}},{{"role":"user","content":"hi"}}]{extra}}}"#
        )
    };
    let files = [
        (
            "break.jsonl",
            format!(
                "{}\n{}\n",
                body("Time: 10:00:01. Be terse.", ""),
                body("Time: 10:00:07. Be terse.", "")
            ),
        ),
        (
            "invalid.jsonl",
            format!(
                "{}\n{{\"model\":\"gpt-4o\",\"api_key\":\"{IN_BODY}\" \"messages\":[]}}\n",
                body("Be terse.", "")
            ),
        ),
        (
            "bad-role.jsonl",
            body(
                "Be terse.",
                r#","tools":[{"type":"function","function":{"parameters":{}}}]"#,
            ),
        ),
        ("single.json", body("Be terse.", "")),
    ];
    files
        .into_iter()
        .map(|(name, text)| {
            let path = folder.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

fn run(folder: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .current_dir(folder)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", OPENAI)
        .env("ANTHROPIC_API_KEY", ANTHROPIC)
        .env("KVLINT_API_KEY", KVLINT)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

#[test]
fn no_command_prints_a_secret_in_any_format() {
    let folder = std::env::temp_dir().join(format!("kvlint-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let files = inputs(&folder);
    let names: Vec<&str> = files
        .iter()
        .map(|path| path.file_name().unwrap().to_str().unwrap())
        .collect();
    let template = kvlint_fixtures::repository().join("fixtures/templates/dated.jinja");
    let template = template.to_str().unwrap();
    let mut runs: Vec<Vec<String>> = Vec::new();
    for format in ["human", "json", "sarif", "github", "junit"] {
        let mut check = vec!["check", "--format", format, "--engine", "openai"];
        check.extend(&names);
        runs.push(check.iter().map(ToString::to_string).collect());
        for args in [
            vec!["diff", "--format", format, "single.json", "single.json"],
            vec!["diff", "--format", format, "break.jsonl", "single.json"],
            vec!["render", "--format", format, "break.jsonl", "invalid.jsonl"],
            vec!["template", "--format", format, template],
            // Nothing listens there: the probe fails, and says so without a key.
            vec![
                "probe",
                "--format",
                format,
                "--timeout",
                "2",
                "--engine-url",
                "http://user:sentinel-password-6e21@127.0.0.1:9",
                "break.jsonl",
            ],
        ] {
            runs.push(args.iter().map(ToString::to_string).collect());
        }
    }
    let mut printed_something = 0;
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let printed = run(&folder, &args);
        printed_something += usize::from(!printed.trim().is_empty());
        for secret in [OPENAI, ANTHROPIC, KVLINT, IN_BODY, IN_HEADER, PASSWORD] {
            assert!(
                !printed.contains(secret),
                "kvlint {} prints {secret}:\n{printed}",
                args.join(" ")
            );
        }
    }
    assert_eq!(printed_something, runs.len());
    // The excerpts that would have shown the secrets are there, masked.
    let invalid = run(&folder, &["check", "invalid.jsonl"]);
    assert!(invalid.contains("\"api_key\":\"*"), "{invalid}");
    std::fs::remove_dir_all(&folder).unwrap();
}
