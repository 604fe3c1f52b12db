//! What rendering fails on: a tokenizer that does not load, a chat template that does not
//! compile, render or stay within its bounds, and a request an engine's request layer refuses
//! or kvlint does not model.
//!
//! Callers that report bad input take it as the request model's [`InputError`]: each variant
//! becomes the one of the same name, with the same message, code and help (what kvlint prints
//! and its exit code do not depend on which crate failed). The constructors the SDK re-exports
//! (`ChatTemplate::from_file`, `Tokenizer::from_file`, …) return `InputError` for that reason.

use kvlint_request::error::InputError;
use kvlint_request::path::PartPath;
use miette::Diagnostic;
use thiserror::Error;

/// A request or a chat template that cannot be rendered, or a tokenizer that cannot be loaded.
#[derive(Debug, Error, Diagnostic)]
pub enum RenderError {
    #[error("cannot load tokenizer {path}: {message}")]
    #[diagnostic(
        code(kvlint::tokenizer),
        help("expected a Hugging Face `tokenizer.json`")
    )]
    Tokenizer { path: String, message: String },

    /// A chat template that does not compile or render, or a tokenizer config without one.
    #[error("chat template {path}: {message}")]
    #[diagnostic(code(kvlint::template))]
    Template {
        path: String,
        message: String,
        #[help]
        help: Option<String>,
    },

    /// A template past a bound on its render (work, output, nesting): hostile, or a loop gone
    /// wrong, whatever conversation it is given.
    #[error("chat template {path}: {message}")]
    #[diagnostic(code(kvlint::template_limit))]
    TemplateLimit {
        path: String,
        message: String,
        #[help]
        help: Option<String>,
    },

    /// The engine answers the request with an error instead of prefilling it.
    #[error("{engine} refuses the request: {reason}")]
    #[diagnostic(
        code(kvlint::refused),
        help("the engine answers this body with HTTP 400 before rendering it; fix the request")
    )]
    Refused {
        engine: &'static str,
        reason: String,
    },

    /// The request refused for one of its parts (`part`, a path in the body).
    #[error("{engine} refuses the request: {reason} (at `{part}`)")]
    #[diagnostic(
        code(kvlint::refused),
        help("the engine answers this body with HTTP 400 before rendering it; fix the request")
    )]
    RefusedPart {
        engine: &'static str,
        reason: String,
        part: PartPath,
    },

    /// A request the engine accepts, through a path kvlint does not reproduce.
    #[error("kvlint does not model how {engine} renders {what}")]
    #[diagnostic(code(kvlint::not_modelled))]
    NotModelled { engine: &'static str, what: String },
}

impl From<RenderError> for InputError {
    fn from(error: RenderError) -> Self {
        match error {
            RenderError::Tokenizer { path, message } => Self::Tokenizer { path, message },
            RenderError::Template {
                path,
                message,
                help,
            } => Self::Template {
                path,
                message,
                help,
            },
            RenderError::TemplateLimit {
                path,
                message,
                help,
            } => Self::TemplateLimit {
                path,
                message,
                help,
            },
            RenderError::Refused { engine, reason } => Self::Refused { engine, reason },
            RenderError::RefusedPart {
                engine,
                reason,
                part,
            } => Self::RefusedPart {
                engine,
                reason,
                part,
            },
            RenderError::NotModelled { engine, what } => Self::NotModelled { engine, what },
        }
    }
}

#[cfg(test)]
mod tests {
    use miette::Diagnostic;

    use super::{InputError, RenderError};
    use crate::path::PartPath;

    fn every_variant() -> Vec<RenderError> {
        vec![
            RenderError::Tokenizer {
                path: "tok/tokenizer.json".into(),
                message: "expected value at line 1 column 1".into(),
            },
            RenderError::Template {
                path: "t.jinja".into(),
                message: "syntax error at line 3".into(),
                help: Some("a help".into()),
            },
            RenderError::TemplateLimit {
                path: "t.jinja".into(),
                message: "the template did more work than its limit allows".into(),
                help: Some("raise `fuel`".into()),
            },
            RenderError::Refused {
                engine: "vLLM",
                reason: "a reason".into(),
            },
            RenderError::RefusedPart {
                engine: "SGLang",
                reason: "a reason".into(),
                part: PartPath::root().key("messages").index(1),
            },
            RenderError::NotModelled {
                engine: "llama.cpp",
                what: "a feature".into(),
            },
        ]
    }

    /// What a caller prints for an error of rendering: its message, code and help, before and
    /// after it becomes an `InputError`.
    fn printed(error: &dyn Diagnostic) -> [String; 3] {
        let code = error
            .code()
            .map(|code| code.to_string())
            .unwrap_or_default();
        let help = error
            .help()
            .map(|help| help.to_string())
            .unwrap_or_default();
        [error.to_string(), code, help]
    }

    /// The two types state each message: a change to one alone would change what kvlint
    /// prints for the same failure, depending on who converted it.
    #[test]
    fn an_input_error_from_a_render_error_prints_the_same() {
        for error in every_variant() {
            let expected = printed(&error);
            let converted = InputError::from(error);
            assert_eq!(printed(&converted), expected);
        }
    }
}
