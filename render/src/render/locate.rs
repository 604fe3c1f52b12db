//! Engine mode: which request part each byte of a chat template's output came from.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::Value;

use super::Segment;
use crate::request::{Part, PartKind, Request};
use crate::template::PythonJson;

/// Engine mode: finds each content part of the request in the rendered text, and gives the
/// text between them (role headers, template text) to a neighbouring part.
///
/// Parts are searched in request order from where the last one was found; tools and system
/// text, which templates move (Qwen puts the tools after the system message), are searched
/// in the whole text.
pub(super) fn locate_parts(
    text: &str,
    request: &Request,
    tools: RenderedTools<'_>,
) -> Vec<Segment> {
    // Located ranges by start, to check a candidate against its neighbours only.
    let mut located: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    let mut is_located = vec![false; request.parts.len()];
    let mut cursor = 0;
    for (index, part) in request.parts.iter().enumerate() {
        if !matches!(
            part.kind,
            PartKind::Tool
                | PartKind::System
                | PartKind::Text
                | PartKind::Arguments
                | PartKind::ToolResult
                | PartKind::Reasoning
        ) {
            continue;
        }
        let is_free = |range: &Range<usize>| {
            let before = located.range(..=range.start).next_back();
            let after = located.range(range.start..).next();
            before.is_none_or(|(_, (end, _))| *end <= range.start)
                && after.is_none_or(|(start, _)| range.end <= *start)
        };
        let tool = (part.kind == PartKind::Tool)
            .then(|| request.tools.iter().position(|tool| tool.path == part.path))
            .flatten();
        let in_head = matches!(part.kind, PartKind::Tool | PartKind::System)
            || part
                .message
                .and_then(|message| request.messages.get(message))
                .is_some_and(|message| message.role.is_instructions());
        let found = needles(part, tool.and_then(|index| tools.needle(index)))
            .into_iter()
            .filter(|needle| !needle.is_empty())
            .find_map(|needle| {
                let after_cursor = find_from(text, cursor, &needle);
                // Only the head of the prompt is rendered out of order by templates; searching
                // the whole text for every part would make rendering quadratic.
                let anywhere = in_head
                    .then_some(())
                    .into_iter()
                    .flat_map(|()| text.match_indices(needle.as_ref()).map(|(at, _)| at));
                after_cursor
                    .into_iter()
                    .chain(anywhere)
                    .map(|start| start..start + needle.len())
                    .find(|range| is_free(range))
            });
        if let Some(range) = found {
            cursor = cursor.max(range.end);
            located.insert(range.start, (range.end, index));
            is_located[index] = true;
        }
    }
    let located: Vec<Segment> = located
        .into_iter()
        .map(|(start, (end, part))| Segment {
            range: start..end,
            part,
        })
        .collect();
    let is_located = |part: usize| is_located[part];
    // Text between two located parts belongs to the first content part the search could not
    // find between them (a tool call the template re-serialized), else to the header of the
    // message that follows, else to the part right after the earlier one.
    let gap_owner = |after: Option<usize>, before: usize| {
        let first = after.map_or(0, |part| part + 1);
        if let Some(skipped) = (first..before)
            .find(|&part| !request.parts[part].kind.is_structural() && !is_located(part))
        {
            return skipped;
        }
        let header = request.parts[before].message.and_then(|message| {
            request.parts[..=before]
                .iter()
                .rposition(|part| part.message == Some(message) && part.kind == PartKind::Header)
        });
        header.unwrap_or(first.min(request.parts.len().saturating_sub(1)))
    };
    let mut segments = Vec::with_capacity(located.len() * 2 + 1);
    let mut previous_end = 0;
    let mut previous_part = None;
    for segment in &located {
        if previous_end < segment.range.start {
            segments.push(Segment {
                range: previous_end..segment.range.start,
                part: gap_owner(previous_part, segment.part),
            });
        }
        previous_end = segment.range.end;
        previous_part = Some(segment.part);
        segments.push(segment.clone());
    }
    if previous_end < text.len() || segments.is_empty() {
        let last = request.parts.len().saturating_sub(1);
        segments.push(Segment {
            range: previous_end..text.len(),
            part: previous_part.map_or(0, |part| (part + 1).min(last)),
        });
    }
    segments
}

/// How far past the last located part the next is first looked for byte by byte: in a
/// rendered template, the next part follows after a short header.
const NEAR: usize = 512;

/// `text[from..].find(needle)`, looking near `from` first by comparing bytes: parts usually
/// follow each other closely, and building a searcher costs as much as the needle is long.
fn find_from(text: &str, from: usize, needle: &str) -> Option<usize> {
    let (bytes, wanted) = (text.as_bytes(), needle.as_bytes());
    let first = *wanted.first()?;
    let near_end = from.saturating_add(NEAR).min(bytes.len());
    let near =
        (from..near_end).find(|&start| bytes[start] == first && bytes[start..].starts_with(wanted));
    if near.is_some() {
        return near;
    }
    // A match starts on a character boundary: the first byte of UTF-8 text never continues one.
    let rest = (near_end..=bytes.len()).find(|&at| text.is_char_boundary(at))?;
    text[rest..].find(needle).map(|at| rest + at)
}

/// The request's tools as the engine hands them on, in request order.
#[derive(Clone, Copy)]
pub(super) enum RenderedTools<'a> {
    /// To a chat template, in chat form whatever the request's API.
    Chat(&'a [Cow<'a, Value>]),
    /// Written into the prompt by the engine itself (Harmony's TypeScript declarations).
    Declared(&'a [String]),
}

/// What a tool is looked for as.
enum ToolNeedle<'a> {
    Chat(&'a Value),
    Declared(&'a str),
}

impl<'a> RenderedTools<'a> {
    fn needle(self, index: usize) -> Option<ToolNeedle<'a>> {
        match self {
            Self::Chat(tools) => tools.get(index).map(|tool| ToolNeedle::Chat(tool.as_ref())),
            Self::Declared(tools) => tools.get(index).map(|tool| ToolNeedle::Declared(tool)),
        }
    }
}

/// The texts a part may appear as in a template's output: as sent, trimmed, and for JSON
/// (a tool, tool-call arguments) as Python's `json.dumps` writes it.
fn needles<'a>(part: &'a Part, tool: Option<ToolNeedle<'a>>) -> Vec<Cow<'a, str>> {
    let parsed = match (part.kind, tool) {
        (PartKind::Tool, Some(ToolNeedle::Declared(declaration))) => {
            return vec![Cow::Borrowed(declaration)];
        }
        (PartKind::Tool, Some(ToolNeedle::Chat(chat_tool))) => Some(Cow::Borrowed(chat_tool)),
        (PartKind::Tool | PartKind::Arguments, _) => serde_json::from_str::<Value>(&part.text)
            .ok()
            .map(Cow::Owned),
        _ => None,
    };
    let mut needles = Vec::new();
    if let Some(value) = &parsed {
        needles.push(Cow::Owned(PythonJson::compact().dumps(value)));
        if let Some(function) = value.get("function") {
            needles.push(Cow::Owned(PythonJson::compact().dumps(function)));
        }
    }
    needles.push(Cow::Borrowed(&*part.text));
    needles.push(Cow::Borrowed(part.text.trim()));
    needles
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finding_near_first_finds_what_a_plain_search_finds() {
        let filler = "é→x ".repeat(200);
        let text = format!("ab{filler}needle ab{filler}needle→é");
        for needle in ["ab", "needle", "needle→é", "→x", "é", "absent", "e→"] {
            for from in (0..=text.len()).filter(|at| text.is_char_boundary(*at)) {
                assert_eq!(
                    find_from(&text, from, needle),
                    text[from..].find(needle).map(|at| from + at),
                    "{needle:?} from {from}"
                );
            }
        }
    }
}
