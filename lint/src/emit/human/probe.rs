//! `kvlint probe`'s human output.

use std::fmt::Write as _;

use super::handler;
use crate::emit::{Terminal, printable};
use crate::report::probe::{Outcome, ProbeReport};

/// Renders `kvlint probe`: a per-turn table of predicted and observed cached tokens.
pub fn render_probe(report: &ProbeReport, terminal: Terminal) -> String {
    let handler = handler(terminal);
    let mut out = String::new();
    for error in &report.errors {
        let _ = handler.render_report(&mut out, error.diagnostic.as_ref());
    }
    for session in &report.sessions {
        let _ = writeln!(
            out,
            "{} on {} ({:?})",
            printable(&session.path),
            printable(&session.engine_url),
            session.engine_kind
        );
        let _ = writeln!(
            out,
            "{:>6} {:>8} {:>10} {:>10}  result",
            "turn", "prompt", "predicted", "observed"
        );
        let number =
            |value: Option<usize>| value.map_or_else(|| "-".to_owned(), |value| value.to_string());
        for turn in &session.turns {
            let result = match turn.outcome {
                Outcome::Match => "match",
                Outcome::Mismatch => "MISMATCH",
                Outcome::Error => "ERROR",
            };
            let own = match turn.own_rendering_matches {
                Some(false) => "; kvlint's own rendering differs",
                _ => "",
            };
            let note = turn
                .note
                .as_deref()
                .map(|note| format!(": {}", printable(note)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:>6} {:>8} {:>10} {:>10}  {result}{note}{own}",
                turn.index,
                number(turn.prompt_tokens),
                number(turn.predicted_cached_tokens),
                number(turn.observed_cached_tokens),
            );
        }
    }
    let turns: Vec<_> = report
        .sessions
        .iter()
        .flat_map(|session| &session.turns)
        .collect();
    let count = |outcome| turns.iter().filter(|turn| turn.outcome == outcome).count();
    let failed = count(Outcome::Error);
    let _ = writeln!(
        out,
        "probed {} turns: {} match, {} do not{}",
        turns.len(),
        count(Outcome::Match),
        count(Outcome::Mismatch),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    out
}
