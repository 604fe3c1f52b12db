// The ES module entry point: the CommonJS build, re-exported by name (test/require.test.cjs
// holds the two to the same names).
import kvlint from "./dist/index.js";

export const {
  Conversation,
  ConversationError,
  Guard,
  GuardError,
  GuardSessions,
  JSONValueError,
  Outcome,
  Report,
  ROUTING_KEY_HEADER,
  check,
  formatFindings,
  guardFetch,
  kvlintMiddleware,
  opensConversation,
  sessionKey,
  toJSONText,
  unwrapGuardError,
} = kvlint;
