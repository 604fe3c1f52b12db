//! Code actions, where the fix is mechanical: a suppression comment, moving a volatile
//! variable's line to the end of its template; for a session file used as a fixture, sorting
//! its tools, or restoring text a later turn changed.

use std::cell::OnceCell;
use std::ops::Range;
use std::sync::{Arc, LazyLock};

use kvlint_core::prompt_template::body_start;
use kvlint_core::session::SessionFile;
use kvlint_request::path::PartPath;
use regex::Regex;
use serde_json::Value;

use super::document::{Analysis, Document, Placed};
use crate::workspace::config::Config;

/// A fix: what it does, and the edits (byte ranges of the document, replacement text).
pub struct Fix {
    pub title: String,
    pub edits: Vec<(Range<usize>, String)>,
    /// The one obvious fix for its finding.
    pub preferred: bool,
}

/// The sessions of a session file, read again from the document's text at most once for all
/// the fixes of a code-action request.
pub struct Sessions<'a> {
    document: &'a Document,
    parsed: OnceCell<Option<Vec<SessionFile>>>,
}

impl<'a> Sessions<'a> {
    pub fn of(document: &'a Document) -> Self {
        Self {
            document,
            parsed: OnceCell::new(),
        }
    }

    fn get(&self) -> Option<&[SessionFile]> {
        self.parsed
            .get_or_init(|| {
                crate::input::parse_all(
                    self.document.path.display().to_string(),
                    Arc::from(self.document.text.as_str()),
                )
                .ok()
            })
            .as_deref()
    }
}

/// The fixes for one finding of `document`.
pub fn fixes(
    document: &Document,
    analysis: &Analysis,
    placed: &Placed,
    config: Option<&Config>,
    sessions: &Sessions<'_>,
) -> Vec<Fix> {
    let mut fixes = Vec::new();
    if analysis.prompt_template
        && let Some(fix) = move_line_to_end(document, analysis, placed, config)
    {
        fixes.push(fix);
    }
    if placed.finding.rule == "tool-order"
        && let Some(fix) = sort_tools(sessions)
    {
        fixes.push(fix);
    } else if analysis.turns.is_some()
        && let Some(fix) = restore_part(sessions, placed)
    {
        fixes.push(fix);
    }
    if let Some(fix) = suppress(document, placed) {
        fixes.push(fix);
    }
    fixes
}

/// `{# kvlint: ignore[rule] #}` (Jinja) or `{{! kvlint: ignore[rule] }}` (Mustache,
/// Handlebars) at the end of the finding's line: a comment renders to nothing, so the
/// prompt is unchanged.
fn suppress(document: &Document, placed: &Placed) -> Option<Fix> {
    let extension = document.path.extension()?.to_str()?;
    let (open, close) = match extension {
        "j2" | "jinja" | "jinja2" | "prompty" => ("{#", "#}"),
        "mustache" | "hbs" | "handlebars" | "dotprompt" => ("{{!", "}}"),
        _ => return None,
    };
    let rule = placed.finding.rule;
    let line = document.lines.line_of(placed.range.start);
    let end = document.lines.line(&document.text, line).end;
    Some(Fix {
        title: format!("Ignore {rule} in this file (kvlint: ignore comment)"),
        edits: vec![(end..end, format!("{open} kvlint: ignore[{rule}] {close}"))],
        preferred: false,
    })
}

/// A Jinja or Handlebars tag that opens, closes or splits a block.
static BLOCK_TAG: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\{%-?\s*(?P<end>end)?(?P<jinja>if|for|macro|block|call|filter|with|raw|autoescape|trans)\b",
        r"|\{%-?\s*(?P<end_set>end)?(?P<set>set)\s+[\w\s,]*?-?%\}",
        r"|\{\{~?\s*(?P<section>[#^/])",
        r"|\{%-?\s*el(?:se|if)\b|\{\{~?\s*else\b",
    ))
    .ok()
});

/// Moves the line holding a volatile variable to the end of the template, where no stable
/// text follows it. Offered only for a line at the top level of the template (in no block,
/// holding no block tag), and only when the template still parses and has fewer findings
/// after the move.
fn move_line_to_end(
    document: &Document,
    analysis: &Analysis,
    placed: &Placed,
    config: Option<&Config>,
) -> Option<Fix> {
    let text = &document.text;
    let block_tag = BLOCK_TAG.as_ref()?;
    let line = document.lines.line_of(placed.range.start);
    let bytes = document.lines.line(text, line);
    let line_text = &text[bytes.clone()];
    let body = body_start(text);
    if bytes.start < body || block_tag.is_match(line_text) {
        return None;
    }
    // In no block: every block opened above the line is closed above it.
    let mut depth: isize = 0;
    for tag in block_tag.captures_iter(&text[body..bytes.start]) {
        let section = tag.name("section").map(|sigil| sigil.as_str());
        let closes =
            tag.name("end").is_some() || tag.name("end_set").is_some() || section == Some("/");
        let opens = !closes
            && (tag.name("jinja").is_some()
                || tag.name("set").is_some()
                || matches!(section, Some("#" | "^")));
        depth += isize::from(opens) - isize::from(closes);
    }
    if depth != 0 {
        return None;
    }
    let after_line = text[bytes.end..]
        .find('\n')
        .map_or(text.len(), |newline| bytes.end + newline + 1);
    let mut moved = String::with_capacity(text.len() + 1);
    moved.push_str(&text[..bytes.start]);
    moved.push_str(&text[after_line..]);
    if !moved.is_empty() && !moved.ends_with('\n') {
        moved.push('\n');
    }
    moved.push_str(line_text);
    if text.ends_with('\n') {
        moved.push('\n');
    }
    let after = Analysis::of_template(&document.path, &moved, config);
    if !after.problems.is_empty() || after.findings.len() >= analysis.findings.len() {
        return None;
    }
    Some(Fix {
        title: format!(
            "Move line {} to the end of the template, after the stable text",
            line + 1
        ),
        edits: vec![(0..text.len(), moved)],
        preferred: true,
    })
}

/// Sorts every turn's tools by name, keeping each tool's bytes as written: a fixture whose
/// turns send the same tools in other orders then sends them in one order.
fn sort_tools(sessions: &Sessions<'_>) -> Option<Fix> {
    let tools = PartPath::root().key("tools");
    let mut edits = Vec::new();
    for session in sessions.get()? {
        for turn in 0..session.len() {
            let ranges: Vec<Range<usize>> = (0..)
                .map_while(|index| session.value_range(turn, &tools.index(index)))
                .collect();
            let names: Option<Vec<String>> = ranges
                .iter()
                .map(|range| tool_name(&session.text[range.clone()]))
                .collect();
            let Some(names) = names else {
                continue;
            };
            let mut order: Vec<usize> = (0..ranges.len()).collect();
            order.sort_by(|a, b| names[*a].cmp(&names[*b]));
            for (slot, from) in order.into_iter().enumerate() {
                if slot != from {
                    edits.push((
                        ranges[slot].clone(),
                        session.text[ranges[from].clone()].to_owned(),
                    ));
                }
            }
        }
    }
    (!edits.is_empty()).then(|| Fix {
        title: "Sort the tools by name in every turn of this file".to_owned(),
        edits,
        preferred: true,
    })
}

/// Restores the text part a break is in to what the turn before sent, in the finding's turn
/// and every later one that sends it otherwise: a fixture whose turns change text the cache
/// held (a date in the system prompt, a rewritten message) then keeps it. Each edit replaces
/// only the bytes that differ, so the JSON string is the earlier turn's, escapes and all.
fn restore_part(sessions: &Sessions<'_>, placed: &Placed) -> Option<Fix> {
    let finding = &placed.finding;
    let previous = finding.turn.checked_sub(1)?;
    let [session] = sessions.get()? else {
        return None;
    };
    let kept = &session.text[session.value_range(previous, &finding.part)?];
    if !kept.starts_with('"') {
        return None;
    }
    let mut edits = Vec::new();
    for turn in finding.turn..session.len() {
        let Some(range) = session.value_range(turn, &finding.part) else {
            continue;
        };
        let sent = &session.text[range.clone()];
        if sent == kept || !sent.starts_with('"') {
            continue;
        }
        let (same_start, same_end) = shared_ends(kept, sent);
        edits.push((
            range.start + same_start..range.end - same_end,
            kept[same_start..kept.len() - same_end].to_owned(),
        ));
    }
    (!edits.is_empty()).then(|| Fix {
        title: format!(
            "Restore {} as turn {} sent it, in turn {} and later (a fixture that keeps its prefix)",
            finding.part,
            finding.previous_turn(),
            finding.turn
        ),
        edits,
        preferred: false,
    })
}

/// How many bytes two texts share at their start and, after that, at their end, both cut at
/// character boundaries.
pub(super) fn shared_ends(a: &str, b: &str) -> (usize, usize) {
    let mut start = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = a[start..]
        .bytes()
        .rev()
        .zip(b[start..].bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    while !a.is_char_boundary(a.len() - end) || !b.is_char_boundary(b.len() - end) {
        end -= 1;
    }
    (start, end)
}

/// A tool's name: `function.name` (OpenAI chat) or `name` (Anthropic, Responses).
fn tool_name(json: &str) -> Option<String> {
    let tool: Value = serde_json::from_str(json).ok()?;
    tool.pointer("/function/name")
        .or_else(|| tool.get("name"))?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::{Path, PathBuf};

    use super::*;
    use crate::lsp::position::Encoding;

    /// The fixes offered for the first finding of a template named `name`.
    fn fixes_of(name: &str, text: &str) -> Vec<(String, String)> {
        let document = Document::new(PathBuf::from(name), text.to_owned(), 1, Encoding::Utf8);
        let analysis = Analysis::of_template(&document.path, text, None);
        let placed = analysis.findings.first().unwrap();
        fixes(&document, &analysis, placed, None, &Sessions::of(&document))
            .into_iter()
            .map(|fix| {
                let mut edited = text.to_owned();
                for (range, new_text) in fix.edits.iter().rev() {
                    edited.replace_range(range.clone(), new_text);
                }
                (fix.title, edited)
            })
            .collect()
    }

    #[test]
    fn a_top_level_line_moves_to_the_end_and_the_finding_goes() {
        let text = "Now: {{ now }}\nYou are the support assistant. Be brief.\n";
        let fixes = fixes_of("support.j2", text);
        let (_, moved) = fixes
            .iter()
            .find(|(title, _)| title.starts_with("Move line 1"))
            .unwrap();
        assert_eq!(
            moved,
            "You are the support assistant. Be brief.\nNow: {{ now }}\n"
        );
        assert!(
            Analysis::of_template(Path::new("support.j2"), moved, None)
                .findings
                .is_empty()
        );
    }

    #[test]
    fn a_line_inside_a_block_stays_where_it_is() {
        for text in [
            "{% if admin %}\nNow: {{ now }}\nYou are the admin assistant. Be brief.\n{% endif %}\n",
            "{% set header %}\nNow: {{ now }}\n{% endset %}\nYou are the assistant. Be brief.\n{{ header }}\n",
            "{% for rule in rules %}{{ rule }}\n{% endfor %}\nNow: {{ now }} {% if x %}\nYou are the assistant. Be brief.\n{% endif %}\n",
        ] {
            let fixes = fixes_of("scoped.j2", text);
            assert!(
                fixes.iter().all(|(title, _)| !title.starts_with("Move")),
                "{text}: {fixes:?}"
            );
        }
        let sections = "{{#admin}}\nRequest {{request_id}}\nYou are the admin assistant. Be brief.\n{{/admin}}\n";
        assert!(
            fixes_of("scoped.mustache", sections)
                .iter()
                .all(|(title, _)| !title.starts_with("Move"))
        );
    }

    #[test]
    fn shared_ends_cut_at_characters() {
        assert_eq!(shared_ends("\"é29 ok\"", "\"é30 ok\""), (3, 4));
        // `é` and `è` share their first byte: the cut is before both.
        assert_eq!(shared_ends("\"é\"", "\"è\""), (1, 1));
        assert_eq!(shared_ends("\"ab\"", "\"ab\""), (4, 0));
    }

    #[test]
    fn the_ignore_comment_is_written_in_the_templates_own_syntax() {
        let text = "Request {{ request_id }}\nYou are the support assistant. Be brief.\n";
        for (name, comment) in [
            ("support.j2", "{# kvlint: ignore[volatile-id] #}"),
            ("support.hbs", "{{! kvlint: ignore[volatile-id] }}"),
        ] {
            let fixes = fixes_of(name, text);
            let (_, ignored) = fixes
                .iter()
                .find(|(title, _)| title.starts_with("Ignore"))
                .unwrap();
            assert_eq!(
                ignored.lines().next().unwrap(),
                format!("Request {{{{ request_id }}}}{comment}")
            );
            assert!(
                Analysis::of_template(Path::new(name), ignored, None)
                    .findings
                    .is_empty()
            );
        }
        // A format-string template has no comment syntax.
        assert!(
            fixes_of(
                "support.prompt",
                "Request {request_id}\nYou are the assistant. Be brief.\n"
            )
            .iter()
            .all(|(title, _)| !title.starts_with("Ignore"))
        );
    }

    /// A pattern that does not compile is `None` at run time, and the move-line fix would be
    /// offered nowhere: it fails here instead.
    #[test]
    fn every_static_pattern_compiles() {
        assert!(BLOCK_TAG.is_some(), "BLOCK_TAG does not compile");
    }
}
