//! Provider mode: the request's parts back to back, each tokenized on its own.

use super::{Rendered, Segment};
use crate::request::{Part, PartKind, Request};
use crate::tokenize::{Tokenizer, Tokens};

/// Bytes of scaffolding text per message header or end, for the text's first allocation.
const SCAFFOLDING_LENGTH: usize = 20;

/// Appends the text provider mode renders for a part: content as sent; around each message,
/// ChatML-like stand-ins for the scaffolding a provider adds (a role header, an end marker).
pub fn push_part_text(text: &mut String, request: &Request, part: &Part) {
    match part.kind {
        PartKind::Header => {
            let role = part
                .message
                .and_then(|message| request.messages.get(message))
                .map_or("", |message| message.role.as_str());
            text.push_str("<|im_start|>");
            text.push_str(role);
            text.push('\n');
        }
        PartKind::End => text.push_str("<|im_end|>\n"),
        _ => text.push_str(&part.text),
    }
}

/// Provider mode: the parts back to back, each tokenized on its own.
pub(super) fn render_parts(
    request: &Request,
    tokenizer: &Tokenizer,
    previous: Option<(&Request, &Rendered)>,
) -> Rendered {
    let length = request
        .parts
        .iter()
        .map(|part| part.text.len() + SCAFFOLDING_LENGTH)
        .sum();
    let mut text = String::with_capacity(length);
    let mut segments = Vec::with_capacity(request.parts.len());
    let mut tokens = Tokens::default();
    for (index, part) in request.parts.iter().enumerate() {
        let start = text.len();
        push_part_text(&mut text, request, part);
        let piece = &text[start..];
        // The same part at the same place as in the previous turn: take its tokens.
        let unchanged = previous.and_then(|(previous_request, previous_rendered)| {
            let previous_part = previous_request.parts.get(index)?;
            let same = previous_part.kind == part.kind
                && if part.kind.is_structural() {
                    let range = previous_rendered.segments.get(index)?.range.clone();
                    previous_rendered.text.get(range) == Some(piece)
                } else {
                    previous_part.text == part.text
                };
            same.then(|| previous_rendered.tokens.piece(index))
                .flatten()
        });
        let chunk = unchanged.unwrap_or_else(|| tokenizer.encode_piece(piece));
        tokens.push_piece(chunk, start);
        segments.push(Segment {
            range: start..text.len(),
            part: index,
        });
    }
    Rendered {
        text,
        segments,
        tokens,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::render::Renderer;
    use crate::request::Request;

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
}
