//! `kvlint check --format sarif|github|junit`: output snapshots, what GitHub requires of
//! SARIF, and escaping of workflow commands.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use kvlint_fixtures::Run;
use serde_json::Value;

/// An error finding, info findings, and a file that cannot be read.
const INPUTS: [&str; 3] = [
    "fixtures/rules/volatile-timestamp/fail/system-date-midnight.jsonl",
    "fixtures/rules/volatile-counter/pass/steps-remaining-tail.json",
    "fixtures/bad/invalid.jsonl",
];

fn kvlint(args: &[&str]) -> Run {
    kvlint_fixtures::run_kvlint(env!("CARGO_BIN_EXE_kvlint"), args)
}

fn check(format: &str) -> Run {
    let mut args = vec!["check", "--format", format];
    args.extend(INPUTS);
    let run = kvlint(&args);
    assert_eq!(run.code, 2, "an input error exits 2 as in human output");
    run
}

fn sarif() -> Value {
    serde_json::from_str(&check("sarif").stdout).unwrap()
}

#[test]
fn sarif_output() {
    let mut sarif = sarif();
    // The full rule list grows with the registry and is checked below; keep the rules the
    // results name, so this snapshot changes only when the output for these inputs does.
    let results = sarif["runs"][0]["results"].as_array().unwrap().clone();
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
        .as_array_mut()
        .unwrap();
    rules.retain(|rule| results.iter().any(|result| result["ruleId"] == rule["id"]));
    insta::with_settings!({ description => "driver.rules trimmed to the rules the results name" }, {
        insta::assert_json_snapshot!(sarif);
    });
}

#[test]
fn sarif_has_what_github_requires() {
    let sarif = sarif();
    assert_eq!(sarif["version"], "2.1.0");
    assert!(sarif["$schema"].as_str().unwrap().starts_with("https://"));
    let run = &sarif["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "kvlint");
    let rules = driver["rules"].as_array().unwrap();
    let mut registry: Vec<_> = kvlint_rules::RULES.iter().map(|rule| rule.meta()).collect();
    registry.sort_by_key(|meta| meta.code);
    let ids: Vec<&str> = rules
        .iter()
        .map(|rule| rule["id"].as_str().unwrap())
        .collect();
    let names: Vec<&str> = registry.iter().map(|meta| meta.name).collect();
    assert_eq!(ids, names, "one rule per registry rule, sorted by code");
    for rule in rules {
        assert!(rule["shortDescription"]["text"].is_string());
        assert!(
            rule["help"]["markdown"]
                .as_str()
                .unwrap()
                .contains("## What it does")
        );
    }

    let results = run["results"].as_array().unwrap();
    // The steps-remaining session's Anthropic requests never mark a breakpoint: one of them.
    assert_eq!(results.len(), 6);
    for result in results {
        let rule_id = result["ruleId"].as_str().unwrap();
        let rule_index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[rule_index]["id"], rule_id);
        assert!(["error", "warning", "note"].contains(&result["level"].as_str().unwrap()));
        assert!(!result["message"]["text"].as_str().unwrap().is_empty());
        let locations = result["locations"].as_array().unwrap();
        assert!(!locations.is_empty());
        for location in locations {
            let physical = &location["physicalLocation"];
            let uri = physical["artifactLocation"]["uri"].as_str().unwrap();
            assert!(INPUTS.contains(&uri), "{uri}");
            let region = &physical["region"];
            assert!(region["startLine"].as_u64().unwrap() >= 1);
            assert!(region["startColumn"].as_u64().unwrap() >= 1);
        }
        assert!(result["partialFingerprints"]["primaryLocationLineHash"].is_string());
    }

    let invocation = &run["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let notification = &invocation["toolExecutionNotifications"][0];
    assert_eq!(notification["level"], "error");
    assert_eq!(
        notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "fixtures/bad/invalid.jsonl"
    );
}

/// The workspace's `repository`, the one owner of the project's address.
fn repository() -> String {
    let root = kvlint_fixtures::repository();
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    manifest["workspace"]["package"]["repository"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn rule_links_resolve_to_the_repository_and_its_files() {
    let repository = repository();
    assert!(
        repository.starts_with("https://github.com/") && !repository.contains(".invalid"),
        "{repository}"
    );
    // The other manifests name the same repository.
    let root = kvlint_fixtures::repository();
    let package: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("editors/vscode/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(package["repository"]["url"], repository.as_str());
    let pyproject: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("python/pyproject.toml")).unwrap())
            .unwrap();
    assert_eq!(
        pyproject["project"]["urls"]["Repository"].as_str(),
        Some(repository.as_str())
    );
    // Every rule's link (SARIF `helpUri`, the language server's `codeDescription`) is a file
    // of this tree, on the repository's main branch.
    let sarif = sarif();
    let driver = &sarif["runs"][0]["tool"]["driver"];
    assert_eq!(driver["informationUri"], repository.as_str());
    let rules = driver["rules"].as_array().unwrap();
    assert_eq!(rules.len(), kvlint_rules::RULES.len());
    let branch = format!("{repository}/blob/main/");
    for rule in rules {
        let link = rule["helpUri"].as_str().unwrap_or_default();
        let path = link
            .strip_prefix(&branch)
            .unwrap_or_else(|| panic!("{}: {link} is not under {branch}", rule["id"]));
        assert!(
            root.join(path).is_file(),
            "{}: {path} is missing",
            rule["id"]
        );
    }
}

#[test]
fn github_output() {
    insta::assert_snapshot!(check("github").stdout);
}

#[test]
fn junit_output() {
    insta::assert_snapshot!(check("junit").stdout);
}

#[test]
fn github_escapes_newlines_in_messages_and_commas_in_properties() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("formats");
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("system-date,midnight.jsonl");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../".to_owned() + INPUTS[0]),
        &session,
    )
    .unwrap();
    let run = kvlint(&["check", "--format", "github", session.to_str().unwrap()]);
    assert_eq!(run.code, 1, "an error finding exits 1 as in human output");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one command per finding: {}", run.stdout);
    let line = lines[0];
    assert!(line.starts_with("::error file="), "{line}");
    assert!(
        line.contains("system-date%2Cmidnight.jsonl,line=4,col=695,"),
        "{line}"
    );
    assert!(line.contains("recomputed%0Ahelp: keep times"), "{line}");
}

#[test]
fn diff_takes_only_human_or_json() {
    let run = kvlint(&[
        "diff",
        "--format",
        "sarif",
        "fixtures/diff/before.json",
        "fixtures/diff/after.json",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("human"), "{}", run.stderr);
}
