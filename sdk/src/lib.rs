//! # kvlint-sdk
//!
//! The library agent code will embed to assemble prompts that keep their cached prefix:
//! stable blocks first, canonical tool schemas, append-only history, a prefix fingerprint and
//! a runtime guard built on `kvlint-core`'s analysis. Not built yet; nothing here is public.
