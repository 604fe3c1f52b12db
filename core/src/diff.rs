//! Turn diffs: how much of a turn's prompt the previous turn's cache covers, and where the rest
//! diverges, placed in the user's file.
//!
//! Why it diverged is not decided here: the rules (`kvlint-rules`) name the cause.

use serde::Serialize;

use crate::prefix::common_prefix_len;
use kvlint_render::render::{Rendered, push_part_text};
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::diagnostic::Span;
use kvlint_request::locate::{Locator, floor_char_boundary};
use kvlint_request::path::PartPath;
use kvlint_request::request::{Part, Request};

/// Tokens shown on each side of a divergence.
const WINDOW_BEFORE: usize = 4;
const WINDOW_AFTER: usize = 8;

/// Where turn i stops being an extension of turn i−1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Index of the first token that differs (equal to the reused token count).
    pub token: usize,
    /// The request part of the later turn the first differing byte belongs to.
    pub part: PartPath,
    /// Byte offset of the first differing byte inside that part's text.
    pub byte: usize,
    pub line: usize,
    pub column: usize,
    /// The changed region in the file, when it can be placed.
    #[serde(skip)]
    pub span: Option<Span>,
    /// Decoded tokens around the divergence, previous turn then this turn.
    #[serde(skip)]
    pub previous_window: String,
    #[serde(skip)]
    pub current_window: String,
    /// Byte offset of the first differing byte in the rendered texts (equal in both).
    #[serde(skip)]
    pub rendered_byte: usize,
}

/// The analysis of one turn against the one before it.
#[derive(Clone, Debug, Serialize)]
pub struct TurnDiff {
    pub index: usize,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    pub first_divergence: Option<Divergence>,
    /// The turn continues a response the provider keeps (`previous_response_id`,
    /// `conversation`): its history is on the server, not in the body. What it sends again
    /// (instructions, tools, settings) is compared with the turn before; its input extends
    /// the server's prompt, whose tokens kvlint does not see, so the counts are the body's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub server_prefix: bool,
}

/// A request and its rendering: one side of a turn diff.
#[derive(Clone, Copy)]
pub struct RenderedRequest<'a> {
    pub request: &'a Request,
    pub rendered: &'a Rendered,
}

/// Diffs turn `index` against the one before it (`None` for a first turn); `locator` places
/// the divergence in the file the later turn came from.
pub fn diff_turns(
    previous: Option<RenderedRequest<'_>>,
    current: RenderedRequest<'_>,
    index: usize,
    tokenizer: &Tokenizer,
    locator: &dyn Locator,
) -> TurnDiff {
    let reused_tokens = previous.map_or(0, |previous| {
        previous
            .rendered
            .tokens
            .common_prefix_len(&current.rendered.tokens)
    });
    let server_prefix = previous.is_some() && current.request.continues_on_server();
    // The whole earlier prompt must be sent again; with the conversation on the server, only
    // the head before it (instructions, tools, settings), in both turns.
    let must_match = |previous: RenderedRequest<'_>| {
        if server_prefix {
            head_tokens(previous).max(head_tokens(current))
        } else {
            previous.rendered.tokens.len()
        }
    };
    let first_divergence = previous
        .filter(|previous| reused_tokens < must_match(*previous))
        .map(|previous| divergence(previous, current, index, reused_tokens, tokenizer, locator));
    TurnDiff {
        index,
        prompt_tokens: current.rendered.tokens.len(),
        reused_tokens,
        first_divergence,
        server_prefix,
    }
}

/// The tokens before the first message or input item: tools, settings, instructions.
fn head_tokens(side: RenderedRequest<'_>) -> usize {
    let parts = &side.request.parts;
    let start = side
        .rendered
        .segments
        .iter()
        .find(|segment| {
            parts
                .get(segment.part)
                .is_some_and(|part| part.message.is_some())
        })
        .map_or(side.rendered.text.len(), |segment| segment.range.start);
    side.rendered.tokens.count_before(start)
}

fn divergence(
    previous: RenderedRequest<'_>,
    current: RenderedRequest<'_>,
    index: usize,
    reused_tokens: usize,
    tokenizer: &Tokenizer,
    locator: &dyn Locator,
) -> Divergence {
    let (previous_text, current_text) = (&previous.rendered.text, &current.rendered.text);
    let token_start = current
        .rendered
        .tokens
        .start(reused_tokens)
        .unwrap_or(current_text.len());
    // The first differing token may share its first bytes; point at the first differing byte.
    let same_bytes = common_prefix_len(
        &previous_text.as_bytes()[token_start.min(previous_text.len())..],
        &current_text.as_bytes()[token_start.min(current_text.len())..],
    );
    let rendered_byte = floor_char_boundary(current_text, token_start + same_bytes);
    // Where this turn has only scaffolding (its message ends) but the earlier turn had
    // content there (text this turn cut, a block it dropped), name that content; where both
    // have scaffolding right after a content part, that part was cut or extended.
    let part_path = match part_at(current, rendered_byte) {
        Some(part) if part.kind.is_structural() => {
            let before = rendered_byte.checked_sub(1);
            content_part_at(previous, rendered_byte)
                .or_else(|| before.and_then(|before| content_part_at(current, before)))
                .or_else(|| before.and_then(|before| content_part_at(previous, before)))
                .map_or_else(|| part.path.clone(), |content| content.path.clone())
        }
        Some(part) => part.path.clone(),
        None => PartPath::default(),
    };
    // The offset inside this turn's text of that part, when it is rendered verbatim.
    let parts = &current.request.parts;
    let own_text = current.rendered.segments.iter().find(|segment| {
        let part = &parts[segment.part];
        part.path == part_path
            && current_text.get(segment.range.clone())
                == Some(part_text(current.request, part).as_str())
    });
    let byte = own_text.map_or(0, |segment| {
        rendered_byte.clamp(segment.range.start, segment.range.end) - segment.range.start
    });
    let change_end = own_text.map_or(byte, |segment| {
        let part = &parts[segment.part];
        let text = part_text(current.request, part);
        let previous_text = previous
            .request
            .parts
            .iter()
            .find(|previous_part| {
                previous_part.path == part.path && previous_part.kind == part.kind
            })
            .map_or_else(String::new, |previous_part| {
                part_text(previous.request, previous_part)
            });
        let change = change_between(&previous_text, &text);
        (text.len() - change.kept_suffix.len())
            .max(byte + 1)
            .min(text.len())
    });
    let start = locator.locate(index, &part_path, byte);
    let end = locator.locate(index, &part_path, change_end);
    let position = start.map(|start| locator.line_column(start));
    let span = start
        .zip(end)
        .map(|(start, end)| locator.span(start, end.max(start + 1)));
    let window = |rendered: &Rendered| {
        let from = reused_tokens.saturating_sub(WINDOW_BEFORE);
        let to = (reused_tokens + WINDOW_AFTER).min(rendered.tokens.len());
        tokenizer.decode(&rendered.tokens.ids_in(from..to))
    };
    Divergence {
        token: reused_tokens,
        part: part_path,
        byte,
        line: position.map_or(0, |position| position.line),
        column: position.map_or(0, |position| position.column),
        span,
        previous_window: window(previous.rendered),
        current_window: window(current.rendered),
        rendered_byte,
    }
}

/// A part's text as provider mode renders it (scaffolding included): what "rendered verbatim"
/// means for a part.
fn part_text(request: &Request, part: &Part) -> String {
    let mut text = String::new();
    push_part_text(&mut text, request, part);
    text
}

/// The request part rendered at byte `offset` of the rendering.
pub fn part_at<'a>(side: RenderedRequest<'a>, offset: usize) -> Option<&'a Part> {
    side.rendered
        .segment_at(offset)
        .and_then(|segment| side.request.parts.get(segment.part))
}

/// The content part (not scaffolding) rendered at byte `offset`.
pub fn content_part_at<'a>(side: RenderedRequest<'a>, offset: usize) -> Option<&'a Part> {
    part_at(side, offset).filter(|part| !part.kind.is_structural())
}

/// The text that changed inside a part: what the previous turn had and what this turn has
/// instead, between their common prefix and common suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub before: &'a str,
    pub after: &'a str,
    /// The text both share after the change.
    pub kept_suffix: &'a str,
    /// The whole part text, previous and current.
    pub previous_text: &'a str,
    pub current_text: &'a str,
}

/// The change between two versions of a text, cut at char boundaries.
pub fn change_between<'a>(previous: &'a str, current: &'a str) -> Change<'a> {
    let prefix = floor_char_boundary(
        previous,
        common_prefix_len(previous.as_bytes(), current.as_bytes()),
    );
    let max_suffix = previous.len().min(current.len()) - prefix;
    // The common suffix is the common prefix of the reversed texts.
    let suffix = common_prefix_len(
        previous.as_bytes()[prefix..].iter().rev(),
        current.as_bytes()[prefix..].iter().rev(),
    )
    .min(max_suffix);
    let previous_end = ceil_char_boundary(previous, previous.len() - suffix);
    let current_end = ceil_char_boundary(current, current.len() - suffix);
    Change {
        before: &previous[prefix..previous_end],
        after: &current[prefix..current_end],
        kept_suffix: &current[current_end..],
        previous_text: previous,
        current_text: current,
    }
}

fn ceil_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_cut_between_common_prefix_and_suffix() {
        let change = change_between("Time: 10:22:31. Be brief.", "Time: 10:22:32. Be brief.");
        assert_eq!((change.before, change.after), ("1", "2"));
        assert_eq!(change.kept_suffix, ". Be brief.");
        let change = change_between("Hi\n\nreminder: 5 left", "Hi");
        assert_eq!(
            (change.before, change.after, change.kept_suffix),
            ("\n\nreminder: 5 left", "", "")
        );
        let change = change_between("é", "è");
        assert_eq!((change.before, change.after), ("é", "è"));
    }
}
