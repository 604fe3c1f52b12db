// Mastra: an Agent on an AI SDK model whose provider is given guardFetch, wrapped with
// kvlintMiddleware (Mastra takes AI SDK models as they are), a few turns against llama-server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Agent } from "@mastra/core/agent";
import { wrapLanguageModel } from "ai";

import { Guard, GuardError, guardFetch, kvlintMiddleware, unwrapGuardError } from "kvlint-cache";

import { RULES, countingFetch, llamaServerForTests } from "./llama.mjs";


const llama = llamaServerForTests();

test("a Mastra agent on a guarded model keeps its prefix; a timestamp in its instructions is refused unsent", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(() => new Guard({ mode: "error" }), { fetch: sent });
  const middleware = kvlintMiddleware(() => new Guard());
  const provider = createOpenAICompatible({ name: "llama", baseURL: `${llama().url}/v1`, fetch });
  const model = wrapLanguageModel({ model: provider.chatModel("tiny-qwen2"), middleware });
  const agent = new Agent({ id: "coder", name: "coder", instructions: RULES, model });
  const options = { modelSettings: { maxOutputTokens: 4 }, maxSteps: 1 };
  const messages = [{ role: "user", content: "Why does the parser test fail?" }];
  for (const next of ["Read the parser.", "Fix it."]) {
    const answer = await agent.generate(messages, options);
    messages.push({ role: "assistant", content: answer.text || "ok" }, { role: "user", content: next });
  }
  await agent.generate(messages, options);
  const observed = fetch.kvlintGuard.observed;
  assert.equal(observed.length, 3);
  assert.ok(observed.every((entry) => entry.outcome.isClean()), JSON.stringify(observed.map((entry) => entry.outcome.findings)));
  // The middleware saw the same bodies, after the calls.
  assert.deepEqual(
    middleware.kvlintGuard.observed.map((entry) => entry.body),
    observed.map((entry) => entry.body),
  );

  const timestamped = new Agent({ id: "coder", name: "coder", instructions: `Current time: 2026-12-01T10:04:31Z\n${RULES}`, model });
  let error;
  try {
    await timestamped.generate([...messages, { role: "assistant", content: "ok" }, { role: "user", content: "Go on." }], options);
  } catch (thrown) {
    error = thrown;
  }
  assert.ok(unwrapGuardError(error) instanceof GuardError, `Mastra passes the GuardError through: ${error}`);
  assert.equal(sent.sent.length, 3, "the refused body was never sent");
});
