//! Finding session files: explicit files as given, directories walked for `*.jsonl` and
//! `*.json`, respecting `.gitignore`.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// A file to check, and whether the user named it (an unreadable named file is an error;
/// a discovered JSON file that is no session is passed over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub path: PathBuf,
    pub explicit: bool,
}

pub fn discover(paths: &[PathBuf]) -> Vec<Candidate> {
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
            .filter(|path| is_session_file_name(path))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().map(|path| Candidate {
            path,
            explicit: false,
        }));
    }
    candidates
}

fn is_session_file_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    (name.ends_with(".jsonl") || name.ends_with(".json")) && !name.ends_with(".expect.json")
}

/// Whether a discovered file looks like recorded requests at all: its first JSON value
/// mentions one of the keys request bodies or their containers have.
pub fn looks_like_session(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    [
        "\"messages\"",
        "\"input\"",
        "\"instructions\"",
        "\"body\"",
        "\"request\"",
    ]
    .iter()
    .any(|key| head.contains(key))
}
