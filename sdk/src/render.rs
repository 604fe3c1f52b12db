//! The conversation rendered as a self-hosted engine prefills it (the `guard` feature).

use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::error::InputError;
use kvlint_request::request::Request;
use serde_json::Value;
use thiserror::Error;

use crate::conversation::Conversation;

/// The conversation could not be rendered through a [`Renderer`].
#[derive(Debug, Error, miette::Diagnostic)]
pub enum RenderError {
    /// The assembled body is not one kvlint reads (a bug in this crate if it happens).
    #[error("the assembled request is not a valid body at `{path}`: {message}")]
    #[diagnostic(code(kvlint_sdk::body))]
    Body { path: String, message: String },
    /// The chat template failed to render the conversation.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Template(#[from] InputError),
}

impl Conversation {
    /// The prompt as a self-hosted engine sees it: the Chat Completions form of this turn
    /// rendered by `renderer`, the same renderer `kvlint check` uses. With
    /// [`Renderer::Engine`] that is the model's chat template and tokenizer; with
    /// [`Renderer::provider`] the provider's cache order with `o200k_base`.
    ///
    /// ```
    /// use kvlint_sdk::Renderer;
    /// use kvlint_sdk::Conversation;
    ///
    /// let mut conversation = Conversation::new();
    /// conversation.add_static("Be terse.").push_user("hi");
    /// let first = conversation.render(&Renderer::provider()).unwrap();
    /// conversation.push_assistant("hello", []).push_user("bye");
    /// let second = conversation.render(&Renderer::provider()).unwrap();
    /// assert!(second.text.starts_with(&first.text));
    /// assert_eq!(first.tokens.common_prefix_len(&second.tokens), first.tokens.len());
    /// ```
    pub fn render(&self, renderer: &Renderer) -> Result<Rendered, RenderError> {
        self.commit();
        let body = Value::Object(self.chat_body());
        let request = Request::from_body(&body).map_err(|error| RenderError::Body {
            path: error.path.to_string(),
            message: error.message,
        })?;
        Ok(renderer.render(&request).map_err(InputError::from)?)
    }
}
