//! # kvlint-core
//!
//! The analysis behind kvlint: recorded agent requests → the exact tokens an engine prefills
//! → the first divergence between consecutive turns, placed in the user's file.
//!
//! Data flows one way: [`session`] reads files into [`request::Request`]s, [`render`] turns a
//! request into text and [`tokenize::Tokens`], [`analysis`] diffs consecutive turns, and rules
//! (in `kvlint-rules`) name each break as a [`diagnostic::Diagnostic`].
//!
//! ```
//! use std::sync::Arc;
//! use kvlint_core::{analysis::SessionAnalysis, render::Renderer, session::SessionFile};
//!
//! let jsonl = concat!(
//!     r#"{"messages":[{"role":"system","content":"Time: 10:00:01. You are terse."},{"role":"user","content":"hi"}]}"#, "\n",
//!     r#"{"messages":[{"role":"system","content":"Time: 10:00:07. You are terse."},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"bye"}]}"#,
//! );
//! let session = SessionFile::parse("s.jsonl".into(), Arc::from(jsonl)).unwrap();
//! let analysis = SessionAnalysis::new(&session, &Renderer::provider()).unwrap();
//! let divergence = analysis.turns[1].first_divergence.as_ref().unwrap();
//! assert_eq!(divergence.part.to_string(), "messages[0].content");
//! // Column 55 is the `7` of `10:00:07`, the first character that differs.
//! assert_eq!((divergence.line, divergence.column), (2, 55));
//! ```

pub mod analysis;
pub mod cache;
pub mod diagnostic;
pub mod error;
pub mod excerpt;
pub mod locate;
pub mod path;
pub mod prompt_template;
pub mod render;
pub mod request;
pub mod routing;
pub mod session;
pub mod template;
pub mod template_check;
pub mod tokenize;
