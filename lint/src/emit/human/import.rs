//! `kvlint import`'s human output.

use std::fmt::Write as _;

use super::handler;
use crate::emit::{Terminal, printable};
use crate::report::import::ImportReport;

/// What `kvlint import` found in each recording and wrote.
pub fn render_import(report: &ImportReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for recording in &report.recordings {
        let _ = writeln!(
            out,
            "{} ({}): {} interactions, {} sessions, {} passed over",
            printable(&recording.path),
            recording.container,
            recording.interactions,
            recording.sessions.len(),
            recording.skipped.len()
        );
        for session in &recording.sessions {
            let rewritten = match session.rewritten {
                0 => String::new(),
                _ if session.reconstructed => " (bodies rebuilt from span attributes)".into(),
                count => format!(" ({count} bodies written out again by the recorder)"),
            };
            let _ = writeln!(
                out,
                "  {}: {} turns from interactions {}{rewritten}",
                printable(&session.file),
                session.turns,
                session
                    .interactions
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            let grouped = session.grouped_by.describe();
            let parent = session
                .parent
                .map(|parent| session.grouped_by.describe_parent(parent));
            let line: Vec<String> = grouped
                .into_iter()
                .chain(parent)
                .chain(session.grouped_by.tally())
                .collect();
            if !line.is_empty() {
                let _ = writeln!(out, "    {}", printable(&line.join("; ")));
            }
        }
        if recording.placements.is_empty() {
            for skipped in &recording.skipped {
                let _ = writeln!(
                    out,
                    "  interaction {} passed over: {}",
                    skipped.interaction,
                    printable(&skipped.reason)
                );
            }
        }
        for placed in &recording.placements {
            let place = match (placed.session, placed.turn, placed.kind) {
                (Some(session), Some(turn), Some(kind)) => {
                    format!("session {session}, turn {turn} ({})", kind.as_str())
                }
                _ => "passed over".to_owned(),
            };
            let _ = writeln!(
                out,
                "  interaction {} → {place}: {}",
                placed.interaction,
                printable(&placed.why)
            );
        }
    }
    out
}
