// LangChain.js: ChatOpenAI given guardFetch through its `configuration` (the openai client it
// builds takes the `fetch`), in a small agent loop with a tool call, against llama-server.
import assert from "node:assert/strict";
import { test } from "node:test";

import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";

import { Guard, GuardError, guardFetch, unwrapGuardError } from "kvlint-cache";

import { RULES, countingFetch, llamaServerForTests } from "./llama.mjs";


const llama = llamaServerForTests();

const tool = (name, description) => ({
  type: "function",
  function: { name, description, parameters: { type: "object", properties: { path: { type: "string" } } } },
});
const readFile = tool("read_file", "Read a file of the repository.");
const runTests = tool("run_tests", "Run the tests.");

test("ChatOpenAI through guardFetch: each turn of a tool loop extends the last; reordered tools are refused unsent", async () => {
  const sent = countingFetch();
  const fetch = guardFetch(() => new Guard({ mode: "error" }), { fetch: sent });
  const chat = new ChatOpenAI({
    model: "tiny-qwen2",
    apiKey: "none",
    maxTokens: 4,
    // A refusal is final: LangChain's own retries would only be refused again.
    maxRetries: 0,
    configuration: { baseURL: `${llama().url}/v1`, fetch, maxRetries: 0 },
  });
  const model = chat.bindTools([readFile, runTests]);
  const messages = [new SystemMessage(RULES), new HumanMessage("Why does the parser test fail?")];
  messages.push(await model.invoke(messages));
  // The tool call the agent makes (the tiny model's answers are random text).
  messages.push(new HumanMessage("Read the parser."));
  messages.push(new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: "read_file", args: { path: "parser.rs" } }] }));
  messages.push(new ToolMessage({ tool_call_id: "call_1", content: "fn parse() { todo!() }" }));
  messages.push(await model.invoke(messages));
  messages.push(new HumanMessage("Fix it."));
  await model.invoke(messages);
  const observed = fetch.kvlintGuard.observed;
  assert.equal(observed.length, 3);
  assert.ok(observed.every((entry) => entry.outcome.isClean()), JSON.stringify(observed.map((entry) => entry.outcome.findings)));
  const [guard] = fetch.kvlintGuard.guards.values();
  assert.ok(guard.counters.reusedTokens > 0);

  const reordered = chat.bindTools([runTests, readFile]);
  let error;
  try {
    await reordered.invoke(messages);
  } catch (thrown) {
    error = thrown;
  }
  const refused = unwrapGuardError(error);
  assert.ok(refused instanceof GuardError, `LangChain's error keeps the GuardError as a cause: ${error}`);
  assert.ok(refused.findings.some((finding) => finding.rule === "tool-order"), JSON.stringify(refused.findings));
  assert.equal(sent.sent.length, 3, "the refused body was never sent");
});
