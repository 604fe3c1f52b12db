// vitest with kvlint's matcher, as an application's test suite uses it: a live agent loop
// through the official openai client against llama-server, recorded through the global fetch.
import OpenAI from "openai";
import { afterAll, beforeAll, expect, test } from "vitest";

import { Conversation, kvlintMatchers, recordPrompts } from "kvlint-cache";

import { RULES, startLlamaServer } from "../test-clients/llama.mjs";

expect.extend(kvlintMatchers);

let server;
beforeAll(async () => {
  server = await startLlamaServer();
}, 90_000);
afterAll(async () => {
  await server?.stop();
});

async function agent(planted) {
  const recorder = recordPrompts();
  try {
    await converse(planted);
  } finally {
    recorder.restore();
  }
  return recorder;
}

async function converse(planted) {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  const conversation = new Conversation();
  conversation.addStatic(RULES);
  conversation.pushUser("Why does the parser test fail?");
  for (let turn = 0; turn < 3; turn += 1) {
    const body = conversation.toOpenAIChat("tiny-qwen2");
    if (planted) {
      body.messages[0].content = `Current time: 2026-12-01T10:0${turn}:00Z\n${body.messages[0].content}`;
    }
    conversation.pushOpenAIResponse(await client.chat.completions.create({ ...body, max_tokens: 4 }));
    conversation.pushUser("Go on.");
  }
}

test("an agent that keeps its prefix passes", async () => {
  const recorded = await agent(false);
  expect(recorded.bodies).toHaveLength(3);
  expect(recorded).toKeepItsPrefix();
});

test("a timestamp written into the system prompt fails with kvlint's message", async () => {
  const recorded = await agent(true);
  expect(recorded).not.toKeepItsPrefix();
  expect(() => expect(recorded).toKeepItsPrefix()).toThrowError(
    /kvlint: 2 cache break\(s\) in the prompts sent:\nvolatile-timestamp \(turn 1, messages\[0\]\.content\).*\nvolatile-timestamp \(turn 2, messages\[0\]\.content\)/,
  );
  expect(globalThis.fetch.kvlintGuard).toBeUndefined();
});
