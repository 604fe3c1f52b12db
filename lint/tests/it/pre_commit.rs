//! The pre-commit hooks, for real: pre-commit (from PyPI) installs kvlint's hook repository
//! at its current commit into a scratch repository, fails on a broken template and passes
//! once it is fixed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

fn run(folder: &Path, program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(folder)
        // The hook builds kvlint; reuse this workspace's build artifacts.
        .env(
            "CARGO_TARGET_DIR",
            kvlint_fixtures::repository().join("target"),
        )
        .env("PRE_COMMIT_HOME", folder.join(".pre-commit-home"))
        .env_remove("GIT_DIR")
        .output()
        .unwrap()
}

fn git(folder: &Path, args: &[&str]) {
    let output = run(folder, Path::new("git"), args);
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_template_hook_fails_on_a_broken_template_and_passes_on_the_fix() {
    let pre_commit =
        kvlint_fixtures::pre_commit().expect("pre-commit missing: run scripts/setup-pre-commit.sh");
    let repository = kvlint_fixtures::repository().canonicalize().unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&repository)
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_owned();

    let folder = std::env::temp_dir().join(format!("kvlint-pre-commit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    git(&folder, &["init", "--quiet"]);
    git(&folder, &["config", "user.email", "test@example.invalid"]);
    git(&folder, &["config", "user.name", "kvlint test"]);
    std::fs::write(
        folder.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {head}\n    hooks:\n      - id: kvlint-templates\n",
            repository.display()
        ),
    )
    .unwrap();
    std::fs::write(
        folder.join("system.j2"),
        "Current time: {{ now }}\nYou are the support assistant. Cite the policy.\n",
    )
    .unwrap();
    git(&folder, &["add", "."]);

    let broken = run(&folder, &pre_commit, &["run", "--all-files"]);
    let output = String::from_utf8_lossy(&broken.stdout).into_owned()
        + &String::from_utf8_lossy(&broken.stderr);
    assert_eq!(broken.status.code(), Some(1), "{output}");
    assert!(output.contains("volatile-timestamp"), "{output}");

    std::fs::write(
        folder.join("system.j2"),
        "You are the support assistant. Cite the policy.\nCurrent time: {{ now }}\n",
    )
    .unwrap();
    git(&folder, &["add", "."]);
    let fixed = run(&folder, &pre_commit, &["run", "--all-files"]);
    let output = String::from_utf8_lossy(&fixed.stdout).into_owned()
        + &String::from_utf8_lossy(&fixed.stderr);
    assert_eq!(fixed.status.code(), Some(0), "{output}");
    std::fs::remove_dir_all(&folder).ok();
}
