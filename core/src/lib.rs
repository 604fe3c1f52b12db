//! # kvlint-core
//!
//! The analysis behind kvlint: recorded agent requests → the exact tokens an engine prefills
//! → the first divergence between consecutive turns, placed in the user's file → what each
//! engine serves from cache.
//!
//! Data flows one way, one module per stage:
//!
//! | stage | module | main types |
//! |---|---|---|
//! | read a session file | [`session`] | [`SessionFile`], [`Turn`] |
//! | a recorded response, a stream put back together | [`response`] | [`response::parse_response`] |
//! | the request model (`kvlint-request`) | [`request`] | [`Request`], [`BodyFormat`] |
//! | render and tokenize (`kvlint-render`) | [`render`], [`template`], [`tokenize`] | [`Renderer`], [`Rendered`], [`ChatTemplate`], [`Tokenizer`] |
//! | diff two turns | [`diff`] | [`TurnDiff`], [`Divergence`] |
//! | place in the file | [`locate`] | [`Locator`] |
//! | predict cache use | [`cache`] | [`Engine`], [`SessionCacheView`] |
//! | findings | [`diagnostic`] | [`Diagnostic`], [`Severity`], [`Span`] |
//!
//! The rules that name each break, and the one pipeline that runs every stage
//! (`check_session`, `check_pair`), live in `kvlint-rules`. Recordings (VCR cassettes, HAR,
//! Inspect logs, OTLP traces) and compressed inputs are read by `kvlint-recordings`, which
//! hands their sessions over as [`SessionFile`]s; core does no decompression and never calls
//! into it. The protocol facts (request formats, keys, engine names) are `kvlint-protocol`'s. Chat templates are also checked
//! before any traffic ([`template_check`]), and application prompt templates for volatile
//! variables ([`prompt_template`]).
//!
//! The request model ([`request`], [`path`], [`locate`], [`diagnostic`], [`error`]) is the
//! `kvlint-request` crate's and rendering ([`render`], [`template`], [`tokenize`],
//! [`template_check`]) the `kvlint-render` crate's; core re-exports them at these paths and
//! keeps sessions, diffs and cache models.
//!
//! ```
//! use std::sync::Arc;
//! use kvlint_core::{Renderer, SessionFile};
//!
//! let jsonl = concat!(
//!     r#"{"messages":[{"role":"user","content":"hi"}]}"#, "\n",
//!     r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"bye"}]}"#,
//! );
//! let session = SessionFile::parse("s.jsonl".into(), Arc::from(jsonl)).unwrap();
//! let renderer = Renderer::provider();
//! // A turn is parsed when read (`turn` gives the one kept, or parses it again: see `session`).
//! let first = renderer.render(&session.turn(0).unwrap().request).unwrap();
//! let second = renderer.render(&session.turn(1).unwrap().request).unwrap();
//! // The second turn extends the first: every token of the first is reused.
//! assert_eq!(first.tokens.common_prefix_len(&second.tokens), first.tokens.len());
//! ```

pub mod cache;
pub mod diff;
pub mod duplicate_keys;
/// The one common-prefix count ([`kvlint_protocol::common_prefix`]).
pub use kvlint_protocol::common_prefix as prefix;
pub mod prompt_template;
pub mod response;
pub mod routing;
pub mod session;

// The request model and rendering live in crates of their own (`kvlint-request`,
// `kvlint-render`); their modules stay reachable at their old paths here for the SDK's public
// API only. Inside the workspace, code imports them from the crate that owns them.
pub use kvlint_render::{render, template, template_check, tokenize};
use kvlint_request::json;
pub use kvlint_request::{diagnostic, error, excerpt, locate, path, request};

pub use cache::{Engine, SessionCacheView, TurnCachePrediction};
pub use diagnostic::{Diagnostic, Severity, SeverityCounts, Span};
pub use diff::{Divergence, RenderedRequest, TurnDiff};
pub use error::InputError;
pub use kvlint_render::RenderError;
pub use locate::{Locator, Unplaced};
pub use path::PartPath;
pub use prefix::common_prefix_len;
pub use render::{EngineRequest, Rendered, Renderer, VllmServer};
pub use request::{BodyFormat, Request};
pub use session::{SessionFile, Turn};
pub use template::{ChatTemplate, TemplateLimits};
pub use tokenize::{Tokenizer, Tokens};
