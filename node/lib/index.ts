/**
 * kvlint-cache for Node: assemble agent prompts that keep their cached prefix, and guard the
 * requests an agent sends, on kvlint's Rust engine.
 *
 * - `sdk`: {@link Conversation}, {@link Guard}, {@link check} and the errors.
 * - `fetch`: {@link guardFetch}, the guard on the wire for every client that takes a `fetch`.
 * - `ai`: {@link kvlintMiddleware}, for the AI SDK's `wrapLanguageModel`.
 * - `testing`: {@link recordPrompts}, {@link assertPrefixStable} and vitest's
 *   {@link kvlintMatchers}.
 */

export * from "./sdk";
export * from "./fetch";
export * from "./ai";
export * from "./testing";
