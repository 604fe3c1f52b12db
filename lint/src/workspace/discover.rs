//! Finding the files to check: files named on the command line as given, directories walked
//! (respecting `.gitignore`) for the files a command reads, in sorted order.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use serde_json::Value;

/// A file to check, and whether the user named it (an unreadable named file is an error;
/// a discovered JSON file that is no session is passed over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub path: PathBuf,
    pub explicit: bool,
}

/// Session files and recordings: `*.jsonl` and `*.json` (except `*.expect.json`), cassettes
/// (`*.yaml`, `*.yml`, compressed or not, LangGraph's `*.msgpack.zlib`), HAR files and Inspect
/// `.eval` logs.
pub fn session_files(paths: &[PathBuf]) -> Vec<Candidate> {
    walk(paths, |name| {
        let name = name.strip_suffix(".gz").unwrap_or(name);
        [
            ".jsonl",
            ".json",
            ".yaml",
            ".yml",
            ".har",
            ".eval",
            ".msgpack.zlib",
        ]
        .iter()
        .any(|extension| name.ends_with(extension))
            && !name.ends_with(".expect.json")
    })
}

/// Request logs (`--log`): JSON Lines and Parquet, compressed or not
/// (`kvlint_recordings::log::is_log_file_name`).
#[cfg(feature = "recordings")]
pub fn log_files(paths: &[PathBuf]) -> Vec<Candidate> {
    walk(paths, kvlint_recordings::log::is_log_file_name)
}

/// Templates: model chat templates (`tokenizer_config.json`, Jinja) and application prompt
/// templates (Mustache, Handlebars, Prompty, Dotprompt).
pub fn template_files(paths: &[PathBuf]) -> Vec<Candidate> {
    walk(paths, is_template)
}

/// Whether a file name is a template's: `tokenizer_config.json`, Jinja, Mustache, Handlebars,
/// Prompty, Dotprompt.
pub fn is_template(name: &str) -> bool {
    name == "tokenizer_config.json"
        || matches!(
            Path::new(name)
                .extension()
                .and_then(|extension| extension.to_str()),
            Some(
                "j2" | "jinja"
                    | "jinja2"
                    | "mustache"
                    | "hbs"
                    | "handlebars"
                    | "prompty"
                    | "dotprompt"
                    | "prompt"
            )
        )
}

/// Named files as given; directories walked for the files whose name `wanted` accepts.
fn walk(paths: &[PathBuf], wanted: impl Fn(&str) -> bool) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for path in paths {
        if !path.is_dir() {
            candidates.push(Candidate {
                path: path.clone(),
                explicit: true,
            });
            continue;
        }
        let mut found: Vec<PathBuf> = WalkBuilder::new(path)
            .build()
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
            .map(ignore::DirEntry::into_path)
            .filter(|file| {
                file.file_name()
                    .is_some_and(|name| wanted(&name.to_string_lossy()))
            })
            .collect();
        found.sort();
        candidates.extend(found.into_iter().map(|path| Candidate {
            path,
            explicit: false,
        }));
    }
    candidates
}

/// Whether a discovered file holds recorded requests: a recording, or its first request (the first line of
/// JSONL, the first element of an array, inside a batch line or a `{request, response}` pair)
/// has the keys of a request body. A file whose first document is not even JSON is taken as
/// a broken session, so that its error is reported; an empty file is passed over.
pub fn looks_like_session(text: &str) -> bool {
    if text.trim().is_empty() {
        return false;
    }
    // A recording, or one that cannot be read (its error is reported); other YAML and JSON
    // (configuration, fixtures of other tools) is passed over. Asked only of what is not a
    // session: a session file is not parsed whole for it.
    #[cfg(feature = "recordings")]
    let is_recording = || {
        !matches!(
            kvlint_recordings::Recording::read(text.as_bytes()),
            Ok(None)
        )
    };
    #[cfg(not(feature = "recordings"))]
    let is_recording = || false;
    if !text.trim_start().starts_with(['{', '[']) {
        return is_recording();
    }
    let first = match serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()
    {
        Some(Ok(first)) => first,
        // Not JSON, or not one document per line: a broken session, or a recording.
        _ => return true,
    };
    let first = match &first {
        Value::Array(items) => items.first().unwrap_or(&Value::Null),
        other => other,
    };
    let body = first
        .get("body")
        .or_else(|| first.get("request"))
        .unwrap_or(first);
    ["messages", "input", "instructions", "contents"]
        .iter()
        .any(|key| body.get(key).is_some())
        || is_recording()
}

#[cfg(test)]
mod tests {
    use super::looks_like_session;

    #[test]
    fn sessions_are_told_from_other_json() {
        assert!(looks_like_session(
            "{\"messages\": []}\n{\"messages\": []}\n"
        ));
        assert!(looks_like_session(
            "[{\"custom_id\": \"a\", \"body\": {\"input\": \"hi\"}}]"
        ));
        assert!(looks_like_session(
            "{\"request\": {\"messages\": []}, \"response\": {}}"
        ));
        assert!(!looks_like_session(""));
        assert!(!looks_like_session("  \n"));
        assert!(
            looks_like_session("{not json"),
            "a broken session is reported, not skipped"
        );
        assert!(!looks_like_session("{\"cases\": [{\"messages\": []}]}"));
        assert!(!looks_like_session(
            "{\"name\": \"pkg\", \"version\": \"1.0.0\"}"
        ));
        assert!(looks_like_session(
            "interactions:\n- request:\n    body: '{}'\n    uri: https://x\n"
        ));
        assert!(!looks_like_session("version: 2\nservices: {}\n"));
    }
}
