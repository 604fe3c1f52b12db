//! `kvlint probe`: replays a session against a live OpenAI-compatible engine and compares
//! what the engine reports as served from cache with kvlint's prediction, turn by turn.
//!
//! Each turn is sent with `max_tokens: 1`, `temperature: 0` and no streaming. The prediction
//! uses the engine's own tokens where the engine offers them: llama.cpp's `/apply-template`
//! then `/tokenize` (`add_special`, `parse_special`), vLLM's and SGLang's `/tokenize` with
//! messages and tools. Every prediction goes through kvlint-core's cache model
//! ([`kvlint_core::cache::Engine::predict`]), set up with what the engine says about itself.
//!
//! - `crate::engine_client`: HTTP, retries, transport errors, the engine's own tokens, its
//!   metrics (the proxy's predictions ask the engine through it too);
//! - [`detect`]: the engine's kind, model, slots and cache settings;
//! - [`replay`]: a session against a self-hosted engine; [`hosted`]: against a hosted API;
//!   [`fleet`]: through a gateway in front of replicas;
//! - [`predict`] and [`observe`]: the two numbers compared per turn; the results the
//!   emitters read are `crate::report::probe`.

mod detect;
mod fleet;
mod hosted;
mod observe;
mod predict;
mod replay;

pub use fleet::{Fleet, probe_fleet};
pub use hosted::probe_hosted;
pub use replay::probe_session;
