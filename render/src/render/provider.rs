//! Provider mode: the request's parts back to back, each tokenized on its own.

use std::sync::Arc;

use super::{Rendered, Segment};
use crate::request::{Part, PartKind, Request, Role};
use crate::tokenize::Tokenizer;

const HEADER_START: &str = "<|im_start|>";
const END: &str = "<|im_end|>\n";

/// Appends the text provider mode renders for a part: content as sent; around each message,
/// ChatML-like stand-ins for the scaffolding a provider adds (a role header, an end marker).
pub fn push_part_text(text: &mut String, request: &Request, part: &Part) {
    match part.kind {
        PartKind::Header => {
            text.push_str(HEADER_START);
            text.push_str(role(request, part).map_or("", Role::as_str));
            text.push('\n');
        }
        PartKind::End => text.push_str(END),
        _ => text.push_str(&part.text),
    }
}

/// The length of the text [`push_part_text`] appends.
fn part_text_len(request: &Request, part: &Part) -> usize {
    match part.kind {
        PartKind::Header => {
            HEADER_START.len() + role(request, part).map_or(0, |role| role.as_str().len()) + 1
        }
        PartKind::End => END.len(),
        _ => part.text.len(),
    }
}

/// The role of the message a part belongs to.
fn role<'a>(request: &'a Request, part: &Part) -> Option<&'a Role> {
    let message = request.messages.get(part.message?)?;
    Some(&message.role)
}

/// Provider mode: the parts back to back, each tokenized on its own.
///
/// Parts sent again unchanged at the same place as in `previous` take its tokens. `spare`, a
/// rendering no longer needed (in a session, the turn before `previous`), lends its
/// allocations, and its leading pieces that this request sends at the same places again are
/// kept where they are: text, segments and chunks alike, so a turn that extends the one two
/// turns before writes only what it adds.
pub(super) fn render_parts(
    request: &Request,
    tokenizer: &Tokenizer,
    previous: Option<(&Request, &Rendered)>,
    spare: Option<Rendered>,
) -> Rendered {
    let Rendered {
        mut text,
        mut segments,
        tokens,
    } = spare.unwrap_or_default();
    let mut tokens = tokens.rebuild();
    // While true, the spare's text and segments up to `kept` are this request's.
    let mut in_place = true;
    let mut kept = 0;
    for (index, part) in request.parts.iter().enumerate() {
        let unchanged = previous.and_then(|(previous_request, previous_rendered)| {
            let previous_part = previous_request.parts.get(index)?;
            let same = previous_part.kind == part.kind
                && match part.kind {
                    // Its text is the role's: the same role, the same text.
                    PartKind::Header => {
                        role(previous_request, previous_part) == role(request, part)
                    }
                    PartKind::End => true,
                    // Equal texts of a session are shared: most compare by address.
                    _ => {
                        Arc::ptr_eq(&previous_part.text, &part.text)
                            || previous_part.text == part.text
                    }
                };
            same.then(|| previous_rendered.tokens.piece(index))
                .flatten()
        });
        if in_place {
            // The same chunk (the encoding of the same text) at the same place, as long: the
            // same text.
            let spared = segments.get(index).filter(|segment| {
                segment.range.start == kept
                    && segment.range.len() == part_text_len(request, part)
                    && unchanged.is_some_and(|chunk| tokens.holds_next(chunk, kept))
            });
            if let (Some(segment), Some(chunk)) = (spared, unchanged) {
                kept = segment.range.end;
                tokens.push_piece(chunk, segment.range.start);
                continue;
            }
            in_place = false;
            text.truncate(kept);
            segments.truncate(index);
            let rest = &request.parts[index..];
            text.reserve(rest.iter().map(|part| part_text_len(request, part)).sum());
            segments.reserve(rest.len());
        }
        let start = text.len();
        push_part_text(&mut text, request, part);
        let encoded;
        let chunk = match unchanged {
            Some(chunk) => chunk,
            None => {
                encoded = tokenizer.encode_piece(&text[start..]);
                &encoded
            }
        };
        tokens.push_piece(chunk, start);
        segments.push(Segment {
            range: start..text.len(),
            part: index,
        });
    }
    if in_place {
        text.truncate(kept);
        segments.truncate(request.parts.len());
    }
    Rendered {
        text,
        segments,
        tokens: tokens.finish(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::render::{Rendered, Renderer};
    use crate::request::{Request, SharedParts};

    #[test]
    fn provider_segments_cover_the_text() {
        let body = json!({"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]});
        let request = Request::from_body(&body).unwrap();
        let rendered = Renderer::provider().render(&request).unwrap();
        let system = rendered.text.find("You are").unwrap();
        let segment = rendered.segment_at(system).unwrap();
        assert_eq!(
            request.parts[segment.part].path.to_string(),
            "messages[0].content"
        );
        assert_eq!(
            rendered.segments.last().map(|s| s.range.end),
            Some(rendered.text.len())
        );
    }

    /// What a rendering is, to compare two: text, segments, and tokens with their places.
    fn contents(rendered: &Rendered) -> String {
        let tokens: Vec<(u32, usize)> = rendered.tokens.iter().collect();
        format!("{:?} {:?} {tokens:?}", rendered.text, rendered.segments)
    }

    #[test]
    fn a_rendering_in_a_spare_ones_place_is_the_rendering() {
        let system = json!({"role": "system", "content": "You are terse."});
        let user = |text: &str| json!({"role": "user", "content": text});
        let assistant = |text: &str| json!({"role": "assistant", "content": text});
        let bodies = [
            vec![system.clone(), user("hi")],
            vec![system.clone(), user("hi"), assistant("hello")],
            vec![system.clone(), user("hi"), assistant("hello"), user("more")],
            // Edited in the middle, then a role changed with the same text.
            vec![
                system.clone(),
                user("hey"),
                assistant("hello"),
                user("more"),
            ],
            vec![system.clone(), user("hey"), user("hello"), user("more")],
            // Shorter (compacted), then longer again, then back to an earlier turn.
            vec![system.clone(), user("hey")],
            vec![system.clone(), user("hey"), assistant("a longer answer")],
            vec![
                system.clone(),
                user("hey"),
                assistant("a longer answer"),
                user("ok"),
            ],
            vec![system.clone(), user("hi"), assistant("hello")],
            vec![
                json!({"role": "system", "content": "You are terse!"}),
                user("hi"),
                assistant("hello"),
            ],
        ];
        // The turns of one session: their texts shared, as reading a session file shares them.
        let mut shared = SharedParts::default();
        let renderer = Renderer::provider();
        let (mut previous, mut spare) = (None::<(Request, Rendered)>, None);
        for messages in &bodies {
            let body = json!({"model": "gpt-4o", "messages": messages});
            let request = Request::parse(body, &mut shared).unwrap();
            let hint = previous
                .as_ref()
                .map(|(request, rendered)| (request, rendered));
            let reusing = renderer
                .render_reusing(&request, hint, spare.take())
                .unwrap();
            let fresh = renderer.render(&request).unwrap();
            assert_eq!(contents(&reusing), contents(&fresh));
            spare = previous
                .replace((request, reusing))
                .map(|(_, rendered)| rendered);
        }
    }

    #[test]
    fn a_function_tool_needs_a_name_and_a_built_in_tool_does_not() {
        let messages = json!([{"role": "user", "content": "hi"}]);
        for tools in [
            json!([{"type": "function", "function": {"parameters": {}}}]),
            json!([{"type": "function", "function": {"name": 7}}]),
            json!([{"type": "function", "parameters": {}}]),
        ] {
            let body = json!({"messages": messages, "tools": tools});
            // Read, so that an engine can refuse the request as it does; the API refuses it.
            let request = Request::from_body(&body).unwrap();
            let error = Renderer::provider().render(&request).unwrap_err();
            assert!(error.to_string().contains("must have a `name`"), "{tools}");
        }
        let built_in = json!({"input": "hi", "tools": [{"type": "web_search"}]});
        let request = Request::from_body(&built_in).unwrap();
        assert!(Renderer::provider().render(&request).is_ok());
    }
}
