// Mastra: an Agent on an AI SDK model whose provider is given guardFetch.
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080/v1 node examples/mastra.mjs
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Agent } from "@mastra/core/agent";

import { Guard, guardFetch } from "kvlint-cache";

const fetch = guardFetch(() => new Guard({ mode: "error" }));
const provider = createOpenAICompatible({ name: "server", baseURL: process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080/v1", fetch });
const agent = new Agent({
  id: "support",
  name: "support",
  instructions: "You are a support agent for Example Bank. Never ask for a full card number.",
  model: provider.chatModel(process.env.KVLINT_MODEL ?? "model"),
});
const options = { modelSettings: { maxOutputTokens: 32 }, maxSteps: 1 };
const messages = [{ role: "user", content: "My card was declined." }];
const answer = await agent.generate(messages, options);
messages.push({ role: "assistant", content: answer.text || "ok" }, { role: "user", content: "It is the blue one." });
await agent.generate(messages, options);
console.log(`kvlint: ${fetch.kvlintGuard.observed.length} turns, no cache break`);
