// The OpenAI Agents SDK for JavaScript: its default OpenAI client given guardFetch, on the Chat
// Completions API, in a few turns of an agent with a tool (the call scripted in the history:
// the tiny model's answers are random text), against llama-server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";

import { Guard, GuardError, guardFetch, unwrapGuardError } from "kvlint-cache";

import { RULES, countingFetch, llamaServerForTests } from "./llama.mjs";


const llama = llamaServerForTests();

const readFile = tool({
  name: "read_file",
  description: "Read a file of the repository.",
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => `contents of ${path}`,
});
const runTests = tool({
  name: "run_tests",
  description: "Run the tests.",
  parameters: z.object({}),
  execute: async () => "1 failed",
});

test("an Agents SDK agent through guardFetch keeps its prefix; a tool added mid-session is refused unsent", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(() => new Guard({ mode: "error" }), { fetch: sent });
  setDefaultOpenAIClient(new OpenAI({ baseURL: `${llama().url}/v1`, apiKey: "none", fetch, maxRetries: 0 }));
  setOpenAIAPI("chat_completions");
  setTracingDisabled(true);
  const settings = { maxTokens: 4 };
  const agent = new Agent({ name: "coder", instructions: RULES, model: "tiny-qwen2", tools: [readFile], modelSettings: settings });
  let history = (await run(agent, "Why does the parser test fail?")).history;
  history = [
    ...history,
    { role: "user", content: "Read the parser." },
    { type: "function_call", callId: "call_1", name: "read_file", arguments: '{"path":"parser.rs"}', status: "completed" },
    { type: "function_call_result", callId: "call_1", name: "read_file", status: "completed", output: { type: "text", text: "fn parse() { todo!() }" } },
  ];
  history = (await run(agent, history)).history;
  history = [...history, { role: "user", content: "Fix it." }];
  await run(agent, history);
  const observed = fetch.kvlintGuard.observed;
  assert.equal(observed.length, 3);
  assert.ok(observed.every((entry) => entry.outcome.isClean()), JSON.stringify(observed.map((entry) => entry.outcome.findings)));

  const grown = agent.clone({ tools: [readFile, runTests] });
  let error;
  try {
    await run(grown, [...history, { role: "user", content: "And the tests?" }]);
  } catch (thrown) {
    error = thrown;
  }
  const refused = unwrapGuardError(error);
  assert.ok(refused instanceof GuardError, `the Agents SDK keeps the GuardError as a cause: ${error}`);
  assert.equal(sent.sent.length, 3, "the refused body was never sent");
});
