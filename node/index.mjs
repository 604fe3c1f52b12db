// The ES module entry point: the CommonJS build, re-exported by name.
import kvlint from "./dist/index.js";

export const {
  Conversation,
  ConversationError,
  Guard,
  GuardError,
  JSONValueError,
  Outcome,
  Report,
  ROUTING_KEY_HEADER,
  check,
  opensConversation,
  sessionKey,
  toJSONText,
} = kvlint;
