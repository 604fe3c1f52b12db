//! `kvlint check`: analyse session files and report.

use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::error::InputError;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;

use crate::discover::{discover, looks_like_session};
use crate::report::{CacheOptions, Report, SessionReport};

pub fn check(paths: &[PathBuf], renderer: &Renderer, options: &CacheOptions) -> Report {
    let mut report = Report::new();
    for candidate in discover(paths) {
        let display = candidate.path.display().to_string();
        let text = match std::fs::read_to_string(&candidate.path) {
            Ok(text) => text,
            Err(source) => {
                report.add_error(InputError::Io {
                    path: display,
                    source,
                });
                continue;
            }
        };
        if !candidate.explicit && !looks_like_session(&text) {
            continue;
        }
        let analysed = SessionFile::parse(display, Arc::from(text))
            .and_then(|session| SessionReport::new(&session, renderer, options));
        match analysed {
            Ok(session) => report.sessions.push(session),
            Err(error) => report.add_error(error),
        }
    }
    report
}
