//! An open document and what the analysis found in it: the same functions as `kvlint check`
//! (sessions, recordings) and `kvlint template` (chat and prompt templates), on the editor's
//! text, with every finding placed in that text.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use kvlint_core::session::SessionFile;
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::locate::{LineColumn, Locator};

use super::actions::shared_ends;
use super::position::{Encoding, LineIndex};
use crate::report::ErrorReport;
use crate::workspace::check::{Setup, check_session, check_sessions, check_template_text};
use crate::workspace::config::Config;
use crate::workspace::discover::{is_template, looks_like_session};

/// The tokenizer prompt templates' stable text is counted in, as `kvlint template` counts it;
/// one for the server's life, so its encoding cache serves every keystroke.
static PROMPT_TOKENIZER: LazyLock<Tokenizer> = LazyLock::new(Tokenizer::o200k_base);

/// A document the client has open.
pub struct Document {
    pub path: PathBuf,
    pub text: String,
    pub version: i32,
    pub lines: LineIndex,
    /// The analysis of this text, once made, and its number (the result id of pulled
    /// diagnostics).
    pub analysis: Option<(u64, Arc<Analysis>)>,
    /// Since the last analysis: that analysis, and the first byte the edits since may have
    /// changed (the text before it is the same).
    pub edited: Option<(Arc<Analysis>, usize)>,
}

impl Document {
    pub fn new(path: PathBuf, text: String, version: i32, encoding: Encoding) -> Self {
        Self {
            lines: LineIndex::new(&text, encoding),
            path,
            text,
            version,
            analysis: None,
            edited: None,
        }
    }

    /// Applies a change: `range` replaced by `new_text`, or the whole text without a range.
    pub fn change(
        &mut self,
        range: Option<lsp_types::Range>,
        new_text: String,
        encoding: Encoding,
    ) {
        let first_changed = match range {
            Some(range) => {
                let start = self.lines.offset(&self.text, range.start);
                let end = self.lines.offset(&self.text, range.end).max(start);
                self.text.replace_range(start..end, &new_text);
                start
            }
            None => {
                let same = self
                    .text
                    .bytes()
                    .zip(new_text.bytes())
                    .take_while(|(was, is)| was == is)
                    .count();
                self.text = new_text;
                kvlint_request::locate::floor_char_boundary(&self.text, same)
            }
        };
        self.lines = LineIndex::new(&self.text, encoding);
        self.edited = match (self.analysis.take(), self.edited.take()) {
            (Some((_, analysis)), _) => Some((analysis, first_changed)),
            (None, Some((analysis, before))) => Some((analysis, before.min(first_changed))),
            (None, None) => None,
        };
    }

    /// Forgets the last analysis: the next one starts from nothing.
    pub fn invalidate(&mut self) {
        self.analysis = None;
        self.edited = None;
    }
}

/// What a document holds: a template (`kvlint template`), or sessions (`kvlint check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Template,
    Session,
}

impl Kind {
    pub fn of(path: &Path) -> Self {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        if is_template(name) {
            Self::Template
        } else {
            Self::Session
        }
    }
}

/// The findings of one analysis of a document, placed in its text.
#[derive(Default)]
pub struct Analysis {
    pub findings: Vec<Placed>,
    /// What kept (part of) the document from being analysed: it does not parse, its
    /// configuration does not load.
    pub problems: Vec<Problem>,
    /// The document is an application prompt template (not a model's chat template).
    pub prompt_template: bool,
    /// For a session file of one session in JSON documents (JSONL), each turn's bytes: an
    /// edit is analysed again from the turn before the first one it touches.
    pub turns: Option<Vec<Range<usize>>>,
}

/// A finding and the bytes of the document it is about.
#[derive(Clone)]
pub struct Placed {
    pub finding: Diagnostic,
    pub range: Range<usize>,
    /// For a finding between two turns, the bytes of the same part in the turn before that
    /// this turn changed (where the file's bytes cannot tell, the start of that part).
    pub previous_change: Option<Range<usize>>,
}

/// An input error, placed in the document where it names a place in it.
pub struct Problem {
    pub message: String,
    pub range: Range<usize>,
}

impl Problem {
    /// An error reading the document (placed at its label) or its configuration (placed at
    /// the top, naming the configuration's file).
    pub fn of(error: &ErrorReport, document: &Path, text: &str) -> Self {
        let in_document = Path::new(&error.path) == document;
        let label = in_document
            .then(|| error.diagnostic.labels()?.next())
            .flatten();
        let range = label.map_or(0..0, |label| {
            let start = label.offset().min(text.len());
            start..(start + label.len()).min(text.len())
        });
        let mut message = if in_document {
            error.message.clone()
        } else {
            format!("{}: {}", error.path, error.message)
        };
        if let Some(help) = error.diagnostic.help() {
            message.push_str(&format!("\nhelp: {help}"));
        }
        Self { message, range }
    }
}

impl Analysis {
    pub fn failed(problem: Problem) -> Self {
        Self {
            problems: vec![problem],
            ..Self::default()
        }
    }

    /// The findings of a template, as `kvlint template` reports them.
    pub fn of_template(path: &Path, text: &str, config: Option<&Config>) -> Self {
        let now = chrono::Local::now().naive_local();
        match check_template_text(path, text.to_owned(), config, None, now, &PROMPT_TOKENIZER) {
            Ok(checked) => Self {
                prompt_template: checked.kind == "prompt",
                findings: checked
                    .findings
                    .into_iter()
                    .map(|finding| Placed {
                        range: finding
                            .span
                            .map_or(0..0, |span| span.offset..span.offset + span.len),
                        finding,
                        previous_change: None,
                    })
                    .collect(),
                ..Self::default()
            },
            Err(error) => Self::failed(Problem::of(&error, path, text)),
        }
    }

    /// The findings of each session a session file or recording holds, as `kvlint check`
    /// reports them. A JSON or YAML file that holds no session is passed over, as `check`
    /// passes it over in a folder.
    pub fn of_sessions(
        path: &Path,
        text: &str,
        lines: &LineIndex,
        config: Option<&Config>,
        setup: &Setup,
    ) -> Self {
        let is_jsonl = path
            .extension()
            .is_some_and(|extension| extension == "jsonl");
        if !is_jsonl && !looks_like_session(text) {
            return Self::default();
        }
        let sessions = match crate::input::parse_all(path.display().to_string(), Arc::from(text)) {
            Ok(sessions) => sessions,
            Err(error) => {
                let problem = Problem::of(&error.into(), path, text);
                let findings =
                    findings_above(path, text, lines, config, setup, problem.range.start);
                return Self {
                    findings,
                    problems: vec![problem],
                    ..Self::default()
                };
            }
        };
        let mut analysis = Self::default();
        for (session, report) in sessions
            .iter()
            .zip(check_sessions(&sessions, config, setup))
        {
            match report {
                Ok(report) => analysis.findings.extend(
                    report
                        .findings
                        .into_iter()
                        .map(|finding| place_in_session(finding, session, text, lines, 0)),
                ),
                Err(error) => analysis.problems.push(Problem::of(&error, path, text)),
            }
        }
        if let [session] = sessions.as_slice()
            && session.origin.is_none()
            && !text
                .trim_start_matches('\u{FEFF}')
                .trim_start()
                .starts_with('[')
        {
            analysis.turns = Some(turn_documents(session, 0));
        }
        analysis
    }

    /// The analysis of a session file edited from byte `first_changed` on since `before` was
    /// made. A finding between two turns depends on those two turns only (`check_session`
    /// checks ranges of turns alike), so the findings up to the turn before the first one the
    /// edit touched are kept, and the file is checked again from that turn on. `None` where
    /// that does not hold (an engine's predictions follow the whole session) or the rest does
    /// not parse (the whole file's analysis places the error).
    pub fn of_session_edit(
        path: &Path,
        text: &str,
        lines: &LineIndex,
        config: Option<&Config>,
        setup: &Setup,
        (before, first_changed): (&Self, usize),
    ) -> Option<Self> {
        let turns = before.turns.as_ref()?;
        if setup.predicts_cache() || !before.problems.is_empty() {
            return None;
        }
        let first_touched = turns
            .iter()
            .position(|turn| turn.end >= first_changed)
            .unwrap_or(turns.len());
        let from = first_touched.checked_sub(1).filter(|from| *from > 0)?;
        let start = turns[from].start;
        let tail =
            SessionFile::parse(path.display().to_string(), Arc::from(&text[start..])).ok()?;
        let report = check_session(&tail, config, setup).ok()?;
        let mut findings: Vec<Placed> = before
            .findings
            .iter()
            .filter(|placed| placed.finding.turn <= from)
            .cloned()
            .collect();
        findings.extend(report.findings.into_iter().map(|finding| {
            let mut placed = place_in_session(finding, &tail, text, lines, start);
            placed.finding.turn += from;
            if let Some(span) = &mut placed.finding.span {
                let (at, end) = (placed.range.start, placed.range.end);
                let (at_place, end_place) = (
                    LineColumn::of_offset(text, at),
                    LineColumn::of_offset(text, end),
                );
                span.offset = at;
                (span.line, span.column) = (at_place.line, at_place.column);
                (span.end_line, span.end_column) = (end_place.line, end_place.column);
            }
            placed
        }));
        let mut turns = turns[..from].to_vec();
        turns.extend(turn_documents(&tail, start));
        Some(Self {
            findings,
            turns: Some(turns),
            ..Self::default()
        })
    }
}

/// The findings of the turns above the line that holds byte `broken` (a session file's line
/// being typed, which does not parse yet): those turns checked as a session of their own, as
/// the findings between two turns depend on those two turns only. A line that lost its end
/// runs into the next one, where the parser stops: then the turns above the line before.
/// None where they do not make one session file.
fn findings_above(
    path: &Path,
    text: &str,
    lines: &LineIndex,
    config: Option<&Config>,
    setup: &Setup,
    broken: usize,
) -> Vec<Placed> {
    let line_start = |end: usize| text[..end].rfind('\n').map_or(0, |newline| newline + 1);
    let mut cut = line_start(kvlint_request::locate::floor_char_boundary(text, broken));
    for _ in 0..2 {
        if cut == 0 {
            break;
        }
        let above = crate::input::parse_all(path.display().to_string(), Arc::from(&text[..cut]));
        if let Ok([session]) = above.as_deref() {
            if session.origin.is_some() {
                break;
            }
            return check_session(session, config, setup)
                .map(|report| {
                    report
                        .findings
                        .into_iter()
                        .map(|finding| place_in_session(finding, session, text, lines, 0))
                        .collect()
                })
                .unwrap_or_default();
        }
        cut = line_start(cut - 1);
    }
    Vec::new()
}

/// The bytes of each turn of `session`, read from the document's text `shift` bytes in.
fn turn_documents(session: &SessionFile, shift: usize) -> Vec<Range<usize>> {
    (0..session.len())
        .filter_map(|index| session.turn_document(index))
        .map(|range| range.start + shift..range.end + shift)
        .collect()
}

/// A finding of `session` (read from the document's `text` `shift` bytes in) at its span,
/// else on the first line of its turn; with the bytes it changed in the turn before.
fn place_in_session(
    finding: Diagnostic,
    session: &SessionFile,
    text: &str,
    lines: &LineIndex,
    shift: usize,
) -> Placed {
    let range = match finding.span {
        Some(span) => shift + span.offset..shift + span.offset + span.len,
        None => {
            let line = lines.line_of(shift) + session.turn_line(finding.turn).saturating_sub(1);
            lines.line(text, line)
        }
    };
    let previous_change = finding
        .turn
        .checked_sub(1)
        .and_then(|previous| {
            let kept = session.value_range(previous, &finding.part);
            let sent = session.value_range(finding.turn, &finding.part);
            kept.zip(sent)
                .map(|(kept, sent)| {
                    let (same_start, same_end) =
                        shared_ends(&session.text[kept.clone()], &session.text[sent]);
                    kept.start + same_start..kept.end - same_end
                })
                .or_else(|| {
                    let start = session.locate(previous, &finding.part, 0)?;
                    Some(start..start)
                })
        })
        .map(|changed| shift + changed.start..shift + changed.end);
    Placed {
        finding,
        range,
        previous_change,
    }
}
