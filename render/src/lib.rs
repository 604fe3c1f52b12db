//! # kvlint-render
//!
//! A request → the exact text and tokens a provider or an engine prefills: provider order
//! and the engines' request layers (vLLM, SGLang, llama.cpp) with gpt-oss's harmony
//! ([`render`]), chat templates rendered as transformers renders them ([`template`]), the
//! tokenizers with their per-chunk cache ([`tokenize`]), and the checks of a chat template
//! before any traffic ([`template_check`]). What they fail on is a [`RenderError`], which
//! converts into the request model's `InputError` for callers that report bad input.
//!
//! It reads the request model of `kvlint-request` and knows nothing of sessions, diffs or
//! cache models (`kvlint-core`'s, which re-exports these modules at their old paths:
//! `kvlint_core::render`, `kvlint_core::template`, …).

// The request model's modules, at the paths rendering names them by.
use kvlint_protocol::common_prefix as prefix;
use kvlint_request::{diagnostic, excerpt, locate, path, request};

pub mod error;
pub mod render;
pub mod template;
pub mod template_check;
pub mod tokenize;

pub use error::RenderError;
pub use render::{EngineRequest, Rendered, Renderer, RendererSetup, SERVING_ENGINES, VllmServer};
pub use template::{ChatTemplate, TemplateLimits};
pub use tokenize::{Tokenizer, Tokens};
