//! The catalog of bad inputs (`fixtures/bad/catalog.toml`): every case ends as the contract
//! says, with its exit code and message, within 30 s and 4 GB, and never with a panic. And the
//! configuration loader, fuzzed through the command line: any `kvlint.toml` ends in a result or
//! an error, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Catalog {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    args: Vec<String>,
    exit: i32,
    prints: String,
}

const TIME_LIMIT: Duration = Duration::from_secs(30);
const MEMORY_LIMIT_KB: i64 = 4 * 1024 * 1024;

/// The largest resident set of any child that ended so far, in kB (a failure to read it
/// fails the test: it must not read as a small peak).
fn children_peak_kb() -> i64 {
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage(RUSAGE_CHILDREN)")
        .max_rss()
}

/// Printed text without the wrapping at the terminal's width and the frame of a report.
fn unwrapped(printed: &str) -> String {
    printed
        .lines()
        .map(|line| {
            let line = line.trim();
            ["× ", "│ ", "x ", "| ", "╰─▶ "]
                .iter()
                .find_map(|frame| line.strip_prefix(frame))
                .unwrap_or(line)
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_bad_input_ends_as_the_catalog_says() {
    let path = kvlint_fixtures::repository().join("fixtures/bad/catalog.toml");
    let catalog: Catalog = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(!catalog.case.is_empty());
    let mut failures = Vec::new();
    for case in &catalog.case {
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let start = Instant::now();
        let run = kvlint_fixtures::run_kvlint_printed(env!("CARGO_BIN_EXE_kvlint"), &args);
        let took = start.elapsed();
        let printed = unwrapped(&run.stdout);
        let peak = children_peak_kb();
        let problem = if run.code != case.exit {
            Some(format!("exit {} (expected {})", run.code, case.exit))
        } else if !printed.contains(&case.prints) {
            Some(format!("does not print {:?}", case.prints))
        } else if run.stdout.contains("panicked") {
            Some("panics".to_owned())
        } else if run.stdout.contains('\u{1b}') || run.stdout.contains('\u{7}') {
            Some("prints a raw control character".to_owned())
        } else if took > TIME_LIMIT {
            Some(format!("takes {took:?}"))
        } else if peak > MEMORY_LIMIT_KB {
            Some(format!("peaks at {peak} kB"))
        } else {
            None
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "kvlint {}: {problem}\n{}",
                args.join(" "),
                run.stdout
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A line of a configuration file: tables, known and unknown keys, values of every type.
fn config_line() -> impl Strategy<Value = String> {
    let table = prop_oneof![
        Just("[rules]"),
        Just("[per-file-ignores]"),
        Just("[template-limits]"),
        Just("[tool.kvlint]"),
        Just("[[rules]]"),
    ]
    .prop_map(str::to_owned);
    let key = prop_oneof![
        Just("fuel"),
        Just("recursion"),
        Just("output-per-input-byte"),
        Just("output-headroom"),
        Just("engine"),
        Just("tokenizer"),
        Just("chat-template"),
        Just("volatile"),
        Just("min-tokens-lost"),
        Just("volatile-timestamp"),
        Just("\"**/[\""),
        Just("unknown"),
    ];
    let value = prop_oneof![
        Just("0"),
        Just("-1"),
        Just("1e999"),
        Just("18446744073709551616"),
        Just("\"off\""),
        Just("\"vllm:block=0\""),
        Just("\"../../nowhere\""),
        Just("[1, \"a\"]"),
        Just("true"),
        Just("{ a = 1 }"),
        Just("\"\\u001b[31m\""),
    ];
    prop_oneof![
        table,
        (key, value).prop_map(|(key, value)| format!("{key} = {value}")),
        "\\PC{0,30}",
    ]
}

fn fuzz_cases() -> u32 {
    std::env::var("KVLINT_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse::<u32>().ok())
        .map_or(64, |cases| cases / 10)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    #[test]
    fn any_configuration_ends_in_a_result_or_an_error(lines in prop::collection::vec(config_line(), 0..6)) {
        let folder = std::env::temp_dir().join(format!("kvlint-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("kvlint.toml"), lines.join("\n")).unwrap();
        std::fs::copy(
            kvlint_fixtures::repository().join("fixtures/templates/stable.jinja"),
            folder.join("stable.jinja"),
        )
        .unwrap();
        let run = kvlint_fixtures::run_kvlint_printed(
            env!("CARGO_BIN_EXE_kvlint"),
            &["template", folder.to_str().unwrap()],
        );
        prop_assert!([0, 1, 2].contains(&run.code), "exit {}: {}", run.code, run.stdout);
        prop_assert!(!run.stdout.contains("panicked"), "{}", run.stdout);
        prop_assert!(!run.stdout.contains('\u{1b}'), "{}", run.stdout);
    }
}
