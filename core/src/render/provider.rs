//! Provider mode: the request's parts back to back, each tokenized on its own.

use super::{Rendered, Segment};
use crate::request::Request;
use crate::tokenize::{Tokenizer, Tokens};

/// Provider mode: the parts back to back, each tokenized on its own.
pub(super) fn render_parts(
    request: &Request,
    tokenizer: &Tokenizer,
    previous: Option<(&Request, &Rendered)>,
) -> Rendered {
    let length = request.parts.iter().map(|part| part.text.len()).sum();
    let mut text = String::with_capacity(length);
    let mut segments = Vec::with_capacity(request.parts.len());
    let mut tokens = Tokens::default();
    for (index, part) in request.parts.iter().enumerate() {
        let start = text.len();
        text.push_str(&part.text);
        segments.push(Segment {
            range: start..text.len(),
            part: index,
        });
        // The same part at the same place as in the previous turn: take its tokens.
        let unchanged = previous.and_then(|(previous_request, previous_rendered)| {
            let previous_part = previous_request.parts.get(index)?;
            (previous_part.text == part.text)
                .then(|| previous_rendered.tokens.piece(index))
                .flatten()
        });
        let chunk = unchanged.unwrap_or_else(|| tokenizer.encode_piece(&part.text));
        tokens.push_piece(chunk, start);
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
