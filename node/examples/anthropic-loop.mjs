// A loop with the `@anthropic-ai/sdk` client: cache breakpoints placed by the Conversation, each
// body guarded as it is sent, streaming and not.
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080 node examples/anthropic-loop.mjs
//
// KVLINT_BASE_URL: any Anthropic-compatible server (llama-server, https://api.anthropic.com);
// KVLINT_MODEL and ANTHROPIC_API_KEY as that server needs.
import Anthropic from "@anthropic-ai/sdk";

import { Conversation, Guard, guardFetch } from "kvlint-cache";

const fetch = guardFetch(() => new Guard({ mode: "error" }));
const client = new Anthropic({
  baseURL: process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080",
  apiKey: process.env.ANTHROPIC_API_KEY ?? "none",
  fetch,
  maxRetries: 0,
});
const model = process.env.KVLINT_MODEL ?? "claude-sonnet-4-5";

const conversation = new Conversation();
conversation.addStatic("You review pull requests: one line per problem, most severe first.");
conversation.addTurnContext(`Today is ${new Date().toISOString().slice(0, 10)}.`); // after the history: never breaks it
conversation.pushUser("Review: `fn parse() { todo!() }`");
const answer = await client.messages.create(conversation.toAnthropic(model, { maxTokens: 64 }));
conversation.pushAnthropicResponse(answer);
conversation.pushUser("And the tests?");
const streamed = await client.messages.stream(conversation.toAnthropic(model, { maxTokens: 64 })).finalMessage();
conversation.pushAnthropicResponse(streamed);
const [guard] = fetch.kvlintGuard.guards.values();
console.log(`kvlint: ${guard.counters.turns} turns, ${streamed.usage.cache_read_input_tokens ?? 0} prompt tokens read from cache, no cache break`);
