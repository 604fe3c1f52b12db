//! # kvlint-request
//!
//! The request model kvlint reads agent traffic into, and the vocabulary every later stage
//! places things with: a body → [`Request`] (its parts in the provider's cache order, one
//! file per API, [`request`]), paths into a body ([`path`]), places in the user's file
//! ([`locate`], [`excerpt`]), findings as plain data ([`diagnostic`]) and the errors of bad
//! input ([`error`]).
//!
//! The request model never renders and never tokenizes: rendering is `kvlint-render`'s,
//! sessions, diffs and cache models `kvlint-core`'s, which re-exports these modules at their
//! old paths (`kvlint_core::request`, `kvlint_core::error`, …).

pub mod diagnostic;
pub mod error;
pub mod excerpt;
pub mod json;
pub mod locate;
pub mod path;
pub mod request;

pub use request::Request;
