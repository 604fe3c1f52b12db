// The ES module entry point: the CommonJS build, re-exported by name (test/require.test.cjs
// holds the two to the same names). Loaded with `require`, not a default import: bundlers and
// vitest's module runner read a TypeScript build's `__esModule` mark and give `exports.default`,
// which it has not.
import { createRequire } from "node:module";

const kvlint = createRequire(import.meta.url)("./dist/index.js");

export const {
  Conversation,
  ConversationError,
  Guard,
  GuardError,
  GuardSessions,
  JSONValueError,
  PromptRecorder,
  Outcome,
  Report,
  ROUTING_KEY_HEADER,
  assertPrefixStable,
  check,
  formatFindings,
  guardFetch,
  kvlintMatchers,
  kvlintMiddleware,
  opensConversation,
  recordPrompts,
  sessionKey,
  sessionOfText,
  toJSONText,
  unwrapGuardError,
} = kvlint;
