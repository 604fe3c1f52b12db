//! Rendering a request into the exact text and tokens an engine prefills.
//!
//! Two modes:
//! - **provider** (the default, offline): the request's parts in the provider's cache order,
//!   each tokenized with the embedded `o200k_base` encoding. Exact for OpenAI's encoding of
//!   the text; an approximation of other providers' counts.
//! - **engine**: the request as the serving engine parses it (`engine_request`), rendered
//!   through the model's chat template (as transformers does) and tokenized with its
//!   `tokenizer.json`: the tokens a self-hosted engine computes.
//!
//! Provider mode lives in `provider`, the engine-mode attribution of template output to
//! request parts in `locate`, the chat-format view of any API's request in `chat_view`, and
//! what an engine does between the body and the template in `engine_request`.

mod chat_view;
mod engine_request;
mod harmony;
mod locate;
mod provider;
mod setup;

use std::borrow::Cow;
use std::ops::Range;

use crate::error::RenderError;
use crate::request::{BodyFormat, Request};
use crate::template::ChatTemplate;
use crate::tokenize::{Tokenizer, Tokens};

pub use chat_view::{chat_view, openai_chat_body};
pub use engine_request::{EngineRequest, LlamaCppServer, SglangServer, TemplateInput, VllmServer};
pub use harmony::is_harmony_tokenizer;
use locate::{RenderedTools, locate_parts};
pub use provider::push_part_text;
use provider::render_parts;
pub use setup::{RendererSetup, SERVING_ENGINES};

/// A byte range of the rendered text and the request part it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub range: Range<usize>,
    /// Index into [`Request::parts`].
    pub part: usize,
}

/// A request as text and tokens, with every byte attributed to a request part.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub text: String,
    /// Sorted, non-overlapping; together they cover the whole text.
    pub segments: Vec<Segment>,
    pub tokens: Tokens,
}

impl Rendered {
    /// The segment that holds byte `offset`, or the last one past the end.
    pub fn segment_at(&self, offset: usize) -> Option<&Segment> {
        let index = self
            .segments
            .partition_point(|segment| segment.range.end <= offset);
        self.segments.get(index).or_else(|| self.segments.last())
    }
}

/// How requests become tokens.
pub enum Renderer {
    Provider {
        tokenizer: Tokenizer,
    },
    Engine {
        template: Box<ChatTemplate>,
        tokenizer: Tokenizer,
        /// The default; a request may ask for its own (vLLM's `add_generation_prompt`).
        add_generation_prompt: bool,
        /// What the serving engine does to a body before its template sees it.
        request: EngineRequest,
    },
}

impl Renderer {
    /// Provider mode with the embedded `o200k_base` encoding.
    pub fn provider() -> Self {
        Self::Provider {
            tokenizer: Tokenizer::o200k_base(),
        }
    }

    /// The name reported as `renderer`: `provider:o200k_base`,
    /// `engine:vllm:<template>+<tokenizer>`, or `engine:<template>+<tokenizer>` when no
    /// engine's request handling is modelled.
    pub fn name(&self) -> String {
        match self {
            Self::Provider { tokenizer } => format!("provider:{}", tokenizer.name()),
            Self::Engine {
                template,
                tokenizer,
                request,
                ..
            } => {
                let engine = request
                    .engine_name()
                    .map(|name| format!("{name}:"))
                    .unwrap_or_default();
                let format = request
                    .own_format()
                    .unwrap_or_else(|| file_name(template.path()));
                format!("engine:{engine}{format}+{}", tokenizer.name())
            }
        }
    }

    /// Whether each rendered prompt ends with the generation prompt, where the model's answer
    /// starts (engine mode, as engines render chat requests).
    pub fn ends_with_generation_prompt(&self) -> bool {
        matches!(
            self,
            Self::Engine {
                add_generation_prompt: true,
                ..
            }
        )
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        match self {
            Self::Provider { tokenizer } | Self::Engine { tokenizer, .. } => tokenizer,
        }
    }

    /// Whether token counts for a request of `format` are only an approximation.
    pub fn is_approximate(&self, format: BodyFormat) -> bool {
        match self {
            // o200k_base is OpenAI's encoding, not Anthropic's, Gemini's or Bedrock models'.
            Self::Provider { .. } => {
                !matches!(format, BodyFormat::OpenAiChat | BodyFormat::OpenAiResponses)
            }
            Self::Engine { .. } => false,
        }
    }

    /// Whether each part's text is a piece encoded on its own (provider mode), so that the
    /// texts of a session can be encoded before its turns are rendered. An engine's chunks
    /// are known only once its template rendered them.
    pub fn encodes_part_texts_whole(&self) -> bool {
        matches!(self, Self::Provider { .. })
    }

    pub fn render(&self, request: &Request) -> Result<Rendered, RenderError> {
        self.render_after(request, None)
    }

    /// Renders a request knowing the turn before it: parts it sends again unchanged reuse
    /// that turn's tokens without being hashed or encoded again.
    pub fn render_after(
        &self,
        request: &Request,
        previous: Option<(&Request, &Rendered)>,
    ) -> Result<Rendered, RenderError> {
        self.render_reusing(request, previous, None)
    }

    /// [`Renderer::render_after`], in the allocations of `spare`, a rendering by this renderer
    /// no longer needed: in a session, the turn before `previous`. In provider mode what it
    /// holds of this request at the same places is kept rather than written again.
    pub fn render_reusing(
        &self,
        request: &Request,
        previous: Option<(&Request, &Rendered)>,
        spare: Option<Rendered>,
    ) -> Result<Rendered, RenderError> {
        match self {
            Self::Provider { tokenizer } => {
                if let Some(tool) = request
                    .tools
                    .iter()
                    .find(|tool| tool.is_nameless_function())
                {
                    return Err(RenderError::RefusedPart {
                        engine: "the API",
                        reason: "a function tool must have a `name`".into(),
                        part: tool.path.clone(),
                    });
                }
                Ok(render_parts(request, tokenizer, previous, spare))
            }
            Self::Engine {
                template,
                tokenizer,
                add_generation_prompt,
                request: engine_request,
            } => {
                // Nothing of it is reused: freed before this rendering is made.
                drop(spare);
                if !request.format.is_served_by_engines() {
                    return Err(RenderError::Refused {
                        engine: engine_request.display_name(),
                        reason: unserved(request.format),
                    });
                }
                if let Some(prompt) = engine_request.own_prompt(request) {
                    let prompt = prompt?;
                    let declared = RenderedTools::Declared(&prompt.tool_declarations);
                    return Ok(Rendered {
                        segments: locate_parts(&prompt.text, request, declared),
                        text: prompt.text,
                        tokens: prompt.tokens,
                    });
                }
                let input =
                    engine_request.template_input(request, template, *add_generation_prompt)?;
                let template = input.template.as_deref().unwrap_or(template);
                let render = |tools: Option<&[Cow<'_, serde_json::Value>]>| {
                    template.apply(&input.messages, tools, input.add_generation_prompt)
                };
                let rendered =
                    render(input.tools.as_deref()).or_else(|error| {
                        match engine_request.tools_to_retry_with(input.tools.as_deref()) {
                            Some(tools) => render(Some(&tools)),
                            None => Err(error),
                        }
                    })?;
                let mut text = input
                    .continued(rendered)
                    .ok_or_else(|| RenderError::Refused {
                        engine: engine_request.display_name(),
                        reason:
                            "continue_final_message is set but the final message does not appear \
                             in the chat after applying the chat template!"
                                .into(),
                    })?;
                text.push_str(&input.prefill);
                if input.add_special_tokens {
                    let (before, after) = tokenizer.added_special_tokens();
                    text.insert_str(0, before);
                    text.push_str(after);
                }
                let segments = locate_parts(
                    &text,
                    request,
                    RenderedTools::Chat(input.tools.as_deref().unwrap_or_default()),
                );
                let earlier = previous.map(|(_, rendered)| (&*rendered.text, &rendered.tokens));
                let tokens = tokenizer.encode_text_after(&text, earlier);
                Ok(Rendered {
                    text,
                    segments,
                    tokens,
                })
            }
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Why an engine refuses a body of a provider's own format.
pub(crate) fn unserved(format: BodyFormat) -> String {
    format!(
        "no endpoint takes a {} body: check it in provider mode (`--engine gemini`, or `--engine anthropic` for Claude on Bedrock)",
        format.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use serde_json::json;

    #[test]
    fn engine_mode_attributes_template_text_to_the_following_part() {
        let dir = std::env::temp_dir().join(format!("kvlint-render-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jinja");
        std::fs::write(
            &path,
            "{% for m in messages %}<{{ m.role }}>{% if loop.first %}Date: {{ strftime_now('%Y-%m-%d') }}\n{% endif %}{{ m.content }}</>{% endfor %}",
        )
        .unwrap();
        let now = NaiveDate::from_ymd_opt(2026, 1, 2)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap();
        let renderer = Renderer::Engine {
            template: Box::new(ChatTemplate::from_file(&path, now).unwrap()),
            tokenizer: Tokenizer::o200k_base(),
            add_generation_prompt: false,
            request: EngineRequest::AsSent,
        };
        let body = json!({"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]});
        let request = Request::from_body(&body).unwrap();
        let rendered = renderer.render(&request).unwrap();
        assert_eq!(
            rendered.text,
            "<system>Date: 2026-01-02\nBe terse.</><user>hi</>"
        );
        let date = rendered
            .segment_at(rendered.text.find("2026").unwrap())
            .unwrap();
        assert_eq!(request.parts[date.part].path.to_string(), "messages[0]");
        let hi = rendered
            .segment_at(rendered.text.find("hi").unwrap())
            .unwrap();
        assert_eq!(
            request.parts[hi.part].path.to_string(),
            "messages[1].content"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
