//! The client of a live engine or API that `kvlint probe` and the proxy's predictions share:
//! HTTP with retries and transport errors ([`client`]), the API keys it sends
//! ([`credentials`]), the engine's own tokens of a prompt
//! ([`tokens`]), and its Prometheus metrics ([`metrics`]).

mod client;
mod credentials;
mod metrics;
mod tokens;

pub use client::Client;
pub use credentials::Api;
pub use metrics::{prometheus_label, prometheus_value};
pub use tokens::{chat_request, engine_text_tokens, engine_tokens};
