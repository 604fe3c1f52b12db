// The guard on the wire with the real clients against a real llama-server: the official
// `openai` and `@anthropic-ai/sdk` clients and the AI SDK's providers, each given
// `guardFetch` as its `fetch`, and the AI SDK's `wrapLanguageModel` with `kvlintMiddleware`.
// Each runs a few turns of an agent that keep their prefix, then a planted mistake that must be
// reported at the call that made it and, in error mode, never sent.
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Anthropic from "@anthropic-ai/sdk";
import { generateText, jsonSchema, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";

import {
  Conversation,
  Guard,
  GuardError,
  check,
  guardFetch,
  kvlintMiddleware,
  unwrapGuardError,
} from "kvlint-cache";

import { RULES, countingFetch, llamaServerForTests } from "./llama.mjs";

const MODEL = "tiny-qwen2";

const llama = llamaServerForTests();

/** What `promise` rejected with. */
async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("the call did not reject");
}

function readFile() {
  return {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file of the repository.",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  };
}

test("the openai client: turns through the guard, and a rewritten prefix refused unsent, retries included", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(() => new Guard({ mode: "error" }), { fetch: sent });
  const client = new OpenAI({ baseURL: `${llama().url}/v1`, apiKey: "none", fetch, maxRetries: 2 });
  const conversation = new Conversation();
  conversation.addStatic(RULES);
  conversation.addTool(readFile());
  conversation.pushUser("Why does the parser test fail?");
  const first = await client.chat.completions.create({ ...conversation.toOpenAIChat(MODEL), max_tokens: 4 });
  conversation.pushOpenAIResponse(first);
  conversation.pushAssistant("", [{ id: "call_1", name: "read_file", arguments: '{"path": "parser.rs"}' }]);
  conversation.pushToolResult("call_1", "fn parse() { todo!() }");
  const second = await client.chat.completions.create({ ...conversation.toOpenAIChat(MODEL), max_tokens: 4 });
  assert.ok(second.choices[0].message);
  const [session] = fetch.kvlintGuard.guards.values();
  assert.equal(session.counters.turns, 2);
  assert.ok(session.counters.reusedTokens > 0);
  assert.equal(sent.sent.length, 2);
  // The usage llama-server reported came back to the session's guard with each answer,
  // summed, and under OpenTelemetry's GenAI names.
  const cached = [first, second].reduce((sum, answer) => sum + answer.usage.prompt_tokens_details.cached_tokens, 0);
  const input = first.usage.prompt_tokens + second.usage.prompt_tokens;
  assert.ok(cached > 0);
  assert.deepEqual(session.reportedUsage, {
    responses: 2,
    inputTokens: input,
    cacheReadInputTokens: cached,
    cacheCreationInputTokens: 0,
  });
  assert.deepEqual(session.otelAttributes(), {
    "gen_ai.usage.input_tokens": input,
    "gen_ai.usage.cache_read.input_tokens": cached,
    "gen_ai.usage.cache_creation.input_tokens": 0,
  });

  // The time written into the system prompt: refused at the call, on every attempt.
  const body = conversation.toOpenAIChat(MODEL);
  body.messages[0].content = `Current time: 2026-12-01T10:04:31Z\n${body.messages[0].content}`;
  const error = await rejection(client.chat.completions.create({ ...body, max_tokens: 4 }));
  const refused = unwrapGuardError(error);
  assert.ok(refused instanceof GuardError, String(error));
  assert.ok(refused.findings.some((finding) => finding.severity === "error"));
  assert.equal(sent.sent.length, 2, "the refused body and its retries were never sent");
});

test("the openai client: two users of one agent, interleaved, are two sessions and neither is refused", async () => {
  const fetch = guardFetch(() => new Guard({ mode: "error" }));
  const client = new OpenAI({ baseURL: `${llama().url}/v1`, apiKey: "none", fetch, maxRetries: 0 });
  // The same agent (its instructions, its tools, the prefix key they make) and no user id.
  const users = ["Why does the parser test fail?", "Add a --verbose flag to the CLI."].map((question) => {
    const conversation = new Conversation();
    conversation.addStatic(RULES);
    conversation.addTool(readFile());
    conversation.pushUser(question);
    return conversation;
  });
  for (const next of ["Go on.", "And the tests?"]) {
    for (const conversation of users) {
      const answer = await client.chat.completions.create({ ...conversation.toOpenAIChat(MODEL), max_tokens: 4 });
      conversation.pushOpenAIResponse(answer);
      conversation.pushUser(next);
    }
  }
  for (const conversation of users) {
    await client.chat.completions.create({ ...conversation.toOpenAIChat(MODEL), max_tokens: 4 });
  }
  const guards = [...fetch.kvlintGuard.guards.values()];
  assert.equal(guards.length, 2);
  assert.deepEqual(
    guards.map((guard) => [guard.counters.turns, guard.counters.refusedTurns]),
    [
      [3, 0],
      [3, 0],
    ],
  );
});

test("the anthropic client, streaming and not: the wire bytes are what the guard saw", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(new Guard({ mode: "error" }), { fetch: sent });
  const client = new Anthropic({ baseURL: llama().url, apiKey: "none", fetch, maxRetries: 0 });
  const conversation = new Conversation();
  conversation.addStatic(RULES);
  conversation.pushUser("Hello.");
  const answer = await client.messages.create(conversation.toAnthropic(MODEL, { maxTokens: 4 }));
  conversation.pushAnthropicResponse(answer);
  conversation.pushUser("Go on.");
  const streamed = await client.messages.stream(conversation.toAnthropic(MODEL, { maxTokens: 4 })).finalMessage();
  assert.ok(streamed.usage.cache_read_input_tokens > 0, "the second turn was served from cache");
  const observed = fetch.kvlintGuard.observed.map((entry) => entry.body);
  const wire = sent.sent.map((body) => JSON.parse(body));
  // The client adds `stream: true`; the rest is the body the guard saw, byte for byte.
  assert.deepEqual(
    observed.map((body) => JSON.stringify(JSON.parse(body))),
    wire.map((body) => JSON.stringify(body)),
  );
  assert.ok(fetch.kvlintGuard.observed.every((entry) => entry.outcome.isClean()));

  // A tool added mid-session: the conversation says so at the call and keeps it for the next
  // compaction; written into the body by hand, it rewrites the prefix and is refused, inside
  // the client's own error class, and never sent.
  const warned = once(process, "warning");
  assert.equal(conversation.addTool(readFile()).deferred, true);
  assert.match((await warned)[0].message, /read_file.*after the first request/);
  conversation.pushUser("Read the parser.");
  const body = conversation.toAnthropic(MODEL, { maxTokens: 4 });
  body.tools = [{ name: "read_file", description: "Read a file.", input_schema: { type: "object" } }];
  const error = await rejection(client.messages.create(body));
  assert.ok(unwrapGuardError(error) instanceof GuardError, String(error));
  assert.equal(sent.sent.length, 2);
});

test("the AI SDK's provider with guardFetch: a reordered tool list is refused before it is sent", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(() => new Guard({ mode: "error" }), { fetch: sent });
  const provider = createOpenAICompatible({ name: "llama", baseURL: `${llama().url}/v1`, fetch });
  const model = provider.chatModel(MODEL);
  const tools = {
    read_file: { description: "Read a file.", inputSchema: jsonSchema({ type: "object", properties: { path: { type: "string" } } }) },
    run_tests: { description: "Run the tests.", inputSchema: jsonSchema({ type: "object", properties: {} }) },
  };
  const messages = [{ role: "user", content: "Why does the parser test fail?" }];
  const options = { model, instructions: RULES, maxOutputTokens: 4, toolChoice: "none" };
  const first = await generateText({ ...options, tools, messages });
  messages.push({ role: "assistant", content: first.text || "ok" }, { role: "user", content: "Go on." });
  await generateText({ ...options, tools, messages });
  assert.equal(sent.sent.length, 2);
  const reordered = { run_tests: tools.run_tests, read_file: tools.read_file };
  messages.push({ role: "assistant", content: "ok" }, { role: "user", content: "And now?" });
  const error = await rejection(generateText({ ...options, tools: reordered, messages, maxRetries: 2 }));
  assert.ok(error instanceof GuardError, `the AI SDK passes the GuardError through: ${error}`);
  assert.ok(error.findings.some((finding) => finding.rule === "tool-order"), JSON.stringify(error.findings));
  assert.equal(sent.sent.length, 2);
});

test("the AI SDK's Anthropic provider: whether providerOptions' cache control reached the wire", async () => {
  const longRules = `${RULES}\n`.repeat(6);
  const run = async (providerOptions) => {
    const fetch = guardFetch(new Guard(), { fetch: countingFetch() });
    const model = createAnthropic({ baseURL: `${llama().url}/v1`, apiKey: "none", fetch })("claude-sonnet-4-5");
    const instructions = { role: "system", content: longRules, providerOptions };
    const messages = [{ role: "user", content: "Hello." }];
    const first = await generateText({ model, instructions, messages, maxOutputTokens: 4 });
    messages.push({ role: "assistant", content: first.text || "ok" }, { role: "user", content: "Go on." });
    await generateText({ model, instructions, messages, maxOutputTokens: 4 });
    return fetch.kvlintGuard.bodies(fetch.kvlintGuard.observed[0].key);
  };
  const marked = await run({ anthropic: { cacheControl: { type: "ephemeral" } } });
  assert.match(JSON.stringify(marked[0].system), /"cache_control":\{"type":"ephemeral"\}/);
  assert.ok(!check(marked).findings.some((finding) => finding.rule === "no-cache-breakpoint"));
  const unmarked = await run(undefined);
  const findings = check(unmarked).findings;
  assert.ok(findings.some((finding) => finding.rule === "no-cache-breakpoint"), JSON.stringify(findings));
});

test("wrapLanguageModel with kvlintMiddleware: a break the provider sent is reported where the call returns", async () => {
  const middleware = kvlintMiddleware(() => new Guard());
  const provider = createOpenAICompatible({ name: "llama", baseURL: `${llama().url}/v1` });
  const model = wrapLanguageModel({ model: provider.chatModel(MODEL), middleware });
  const messages = [{ role: "user", content: "Hello." }];
  const first = await generateText({ model, instructions: RULES, messages, maxOutputTokens: 4 });
  messages.push({ role: "assistant", content: first.text || "ok" }, { role: "user", content: "Go on." });
  const streamed = streamText({ model, instructions: RULES, messages, maxOutputTokens: 4 });
  await streamed.text;
  assert.equal(middleware.kvlintGuard.observed.length, 2);
  assert.ok(middleware.kvlintGuard.observed.every((entry) => entry.outcome.isClean()));
  const warned = once(process, "warning");
  messages.push({ role: "assistant", content: "ok" }, { role: "user", content: "More." });
  await generateText({ model, instructions: `Current time: 2026-12-01T10:04:31Z\n${RULES}`, messages, maxOutputTokens: 4 });
  const [warning] = await warned;
  assert.equal(warning.name, "CacheWarning");
  assert.match(warning.message, /turn 2/);
});
