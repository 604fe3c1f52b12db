// A full agent loop in the Anthropic format, the TypeScript twin of python/tests/test_full_loop.py:
// thinking blocks, an image, a checkpoint and restore between turns, a compaction, and planted
// mistakes, each reported at the call that made it. Every body the guard accepts is sent to
// llama-server's /v1/messages with the official client (its tiny vision projector takes the
// image), which must accept it.
import assert from "node:assert/strict";
import { test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";

import { Conversation, ConversationError, Guard, GuardError } from "kvlint-cache";

import { llamaServerForTests } from "./llama.mjs";

const MODEL = "tiny-qwen2";
const PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const THINKING = { type: "thinking", thinking: "The user wants the files listed.", signature: "c2lnbmF0dXJl" };
const REDACTED = { type: "redacted_thinking", data: "ZW5jcnlwdGVk" };
const IMAGE = { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_BASE64 } };
const LIST_FILES = {
  type: "function",
  function: { name: "list_files", description: "List the files.", parameters: { type: "object", properties: { path: { type: "string" } } } },
};

const llama = llamaServerForTests();

/** Content blocks without the `cache_control` marker the newest message carries. */
const withoutBreakpoints = (blocks) => blocks.map(({ cache_control: _, ...block }) => block);

/** Runs `call`, collecting the CacheWarnings it issues (synchronously, at the call). */
function warnings(call) {
  const seen = [];
  const listener = (warning) => warning.name === "CacheWarning" && seen.push(warning);
  const original = process.emitWarning;
  process.emitWarning = (warning, options) => listener({ name: options?.type ?? "Warning", message: String(warning) });
  try {
    return [call(), seen];
  } finally {
    process.emitWarning = original;
  }
}

test("an image, thinking, a restore, a compaction and planted mistakes, each at its call", async () => {
  const guard = new Guard({ mode: "error" });
  const client = new Anthropic({ baseURL: llama().url, apiKey: "none", maxRetries: 0 });
  const sent = async (body) => {
    const outcome = guard.observe(body);
    await client.messages.create({ ...body, max_tokens: 4 });
    return outcome;
  };
  let conversation = new Conversation(); // not strict: mistakes that keep the call valid warn

  // Planted mistake 1: a timestamp in the static tier warns at addStatic.
  const [, staticWarnings] = warnings(() => conversation.addStatic("You are a file agent. Today is 2025-03-04T10:22:31Z."));
  assert.equal(staticWarnings.length, 1);
  assert.match(staticWarnings[0].message, /timestamp/);

  conversation.addTool(LIST_FILES);
  conversation.pushUser([{ type: "text", text: "What is in this picture?" }, IMAGE]);
  let body = conversation.toAnthropic(MODEL);
  assert.deepEqual(withoutBreakpoints(body.messages[0].content)[1], IMAGE);
  assert.ok((await sent(body)).isClean());

  conversation.pushAssistant("", [{ id: "toolu_1", name: "list_files", arguments: '{"path": "."}' }], { thinking: [THINKING, REDACTED] });
  // Planted mistakes 2 and 3: a result for a call nobody made, an empty message: refused.
  assert.throws(() => conversation.pushToolResult("toolu_404", "nothing"), ConversationError);
  assert.throws(() => conversation.pushUser(""), ConversationError);
  conversation.pushToolResult("toolu_1", [{ type: "text", text: "README.md" }]);

  // Checkpoint and restore between turns.
  conversation = Conversation.fromJSON(JSON.stringify(conversation));
  conversation.addTurnContext("Current time: 2025-03-04T10:22:40Z");
  body = conversation.toAnthropic(MODEL);
  assert.deepEqual(body.messages[1].content.slice(0, 2).map((block) => block.type), ["thinking", "redacted_thinking"]);
  assert.deepEqual(body.messages[1].content[0], THINKING, "thinking goes back verbatim, signature included");
  assert.ok((await sent(body)).isClean());

  // Planted mistake 4: a tool added after the first request waits for compaction, warned.
  const [change, toolWarnings] = warnings(() =>
    conversation.addTool({ name: "read_file", description: "Read a file.", input_schema: { type: "object", properties: {} } }),
  );
  assert.ok(change.deferred && !change.applied);
  assert.equal(toolWarnings.length, 1);
  assert.equal(conversation.pendingChanges.length, 1);

  // Planted mistake 5: a hand-edited body (history rewritten) is refused by the guard.
  const edited = structuredClone(conversation.preview().toAnthropic(MODEL));
  edited.messages[0].content[0].text = "What is in this photo?";
  assert.throws(
    () => guard.observe(edited),
    (error) => error instanceof GuardError && error.findings.some((finding) => finding.severity === "error"),
  );

  conversation.pushAssistant("A README and a 1x1 image.");
  conversation.pushUser("Thanks.");
  assert.ok((await sent(conversation.toAnthropic(MODEL))).isClean());

  // A compaction on purpose: announced, so the guard accepts the break and counts it.
  const cacheBreak = conversation.compact(2);
  assert.ok(cacheBreak.lostBlocks > 0);
  assert.deepEqual(conversation.pendingChanges, []); // the waiting tool is applied now
  guard.expectBreak();
  const compacted = conversation.toAnthropic(MODEL);
  await sent(compacted); // not refused
  assert.equal(guard.counters.refusedTurns, 1); // the hand-edited body only
  assert.deepEqual(new Set(compacted.tools.map((tool) => tool.name)), new Set(["list_files", "read_file"]));

  // A restore after the compaction still sends the same bytes.
  const restored = Conversation.fromJSON(conversation.toJSON());
  assert.equal(JSON.stringify(restored.preview().toAnthropic(MODEL)), JSON.stringify(conversation.preview().toAnthropic(MODEL)));
});
