//! `kvlint check`: analyse session files and report.

use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::error::InputError;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;

use crate::config::Discovery;
use crate::discover::{discover, looks_like_session};
use crate::report::{CacheOptions, Report, SessionReport};

pub fn check(
    paths: &[PathBuf],
    renderer: &Renderer,
    options: &CacheOptions,
    configs: &mut Discovery,
) -> Report {
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
        match (analysed, configs.for_file(&candidate.path)) {
            (Ok(mut session), Ok(config)) => {
                if let Some(config) = config {
                    session.apply_config(&config);
                }
                report.sessions.push(session);
            }
            (Err(error), _) => report.add_error(error),
            (Ok(_), Err(error)) => report.add_config_error(error),
        }
    }
    report
}
