//! SARIF 2.1.0: the subset GitHub code scanning reads.

use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_rules::RuleMeta;
use serde_json::{Value, json};

use crate::report::{CheckedFile, ErrorReport};

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

pub fn render(files: &[CheckedFile<'_>], errors: &[ErrorReport]) -> String {
    let mut rules: Vec<&RuleMeta> = kvlint_rules::RULES.iter().map(|rule| rule.meta()).collect();
    rules.sort_by_key(|meta| meta.code);
    let results: Vec<Value> = files
        .iter()
        .flat_map(|file| {
            file.findings
                .iter()
                .map(|finding| result(&rules, file.path, finding))
        })
        .collect();
    let notifications: Vec<Value> = errors
        .iter()
        .map(|error| {
            json!({
                "level": "error",
                "message": { "text": error.message },
                "locations": [{ "physicalLocation": { "artifactLocation": { "uri": uri(&error.path) } } }],
            })
        })
        .collect();
    let sarif = json!({
        "version": "2.1.0",
        "$schema": SCHEMA,
        "runs": [{
            "tool": {
                "driver": {
                    "name": "kvlint",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": kvlint_rules::REPOSITORY,
                    "rules": rules.iter().copied().map(rule).collect::<Vec<_>>(),
                }
            },
            "invocations": [{
                "executionSuccessful": errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            // Span columns count characters, not the UTF-16 units SARIF assumes otherwise.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    serde_json::to_string_pretty(&sarif).unwrap_or_default() + "\n"
}

fn rule(meta: &RuleMeta) -> Value {
    let docs = meta.documentation();
    json!({
        "id": meta.name,
        "name": camel_case(meta.name),
        "shortDescription": { "text": meta.summary },
        "fullDescription": { "text": meta.summary },
        "help": { "text": docs, "markdown": docs },
        "helpUri": meta.url(),
        // Severity follows the cost of each finding, not the rule; results carry their own.
        "defaultConfiguration": { "level": "error" },
        "properties": { "code": meta.code },
    })
}

fn result(rules: &[&RuleMeta], path: &str, finding: &Diagnostic) -> Value {
    let rule_index = rules
        .iter()
        .position(|meta| meta.name == finding.rule)
        .map_or(-1, |index| index as i64);
    let level = match finding.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    };
    let mut physical_location = json!({ "artifactLocation": { "uri": uri(path) } });
    if let Some(span) = finding.span {
        physical_location["region"] = json!({
            "startLine": span.line,
            "startColumn": span.column,
            "endLine": span.end_line,
            "endColumn": span.end_column,
        });
    }
    // The place in the session, not its line numbers: stable across runs and platforms.
    let key = format!(
        "{}\0{}\0{}\0{}",
        finding.rule,
        uri(path),
        finding.part,
        finding.turn
    );
    let fingerprint = blake3::hash(key.as_bytes()).to_hex();
    json!({
        "ruleId": finding.rule,
        "ruleIndex": rule_index,
        "level": level,
        "message": { "text": format!("{}\nhelp: {}", finding.message, finding.help) },
        "locations": [{ "physicalLocation": physical_location }],
        "partialFingerprints": {
            "primaryLocationLineHash": format!("{}:1", &fingerprint[..16]),
        },
        "properties": {
            "code": finding.code,
            "turn": finding.turn,
            "part": finding.part.to_string(),
            "tokensLost": finding.tokens_lost,
        },
    })
}

/// `volatile-timestamp` → `VolatileTimestamp`.
fn camel_case(name: &str) -> String {
    name.split('-')
        .flat_map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

/// A relative URI reference for a path as given: forward slashes, other bytes outside the
/// unreserved set percent-encoded.
fn uri(path: &str) -> String {
    let mut uri = String::new();
    for byte in path.replace('\\', "/").bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}
