// The AI SDK: a provider given guardFetch (each body refused before it is sent if it breaks the
// prefix), and the same model wrapped with kvlintMiddleware (which reports what was sent).
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080/v1 node examples/ai-sdk.mjs
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, wrapLanguageModel } from "ai";

import { Guard, guardFetch, kvlintMiddleware } from "kvlint-cache";

const fetch = guardFetch(() => new Guard({ mode: "error" }));
const provider = createOpenAICompatible({ name: "server", baseURL: process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080/v1", fetch });
const middleware = kvlintMiddleware();
const model = wrapLanguageModel({ model: provider.chatModel(process.env.KVLINT_MODEL ?? "model"), middleware });

const instructions = "You are a release-notes writer: one line per change, newest first.";
const messages = [{ role: "user", content: "Changes: parser fixed; cache key added." }];
for (const next of ["Shorter.", "Now in French."]) {
  const { text } = await generateText({ model, instructions, messages, maxOutputTokens: 32 });
  messages.push({ role: "assistant", content: text || "ok" }, { role: "user", content: next });
}
await generateText({ model, instructions, messages, maxOutputTokens: 32 });
const clean = middleware.kvlintGuard.observed.every((entry) => entry.outcome.isClean());
console.log(`kvlint: ${fetch.kvlintGuard.observed.length} turns, ${clean ? "no cache break" : "a cache break"}`);
