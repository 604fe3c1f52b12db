// A tool-using loop with the `openai` client, built by a Conversation and guarded on the wire.
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080/v1 node examples/openai-loop.mjs
//
// KVLINT_BASE_URL: any OpenAI-compatible server (llama-server, vLLM, SGLang,
// https://api.openai.com/v1); KVLINT_MODEL and OPENAI_API_KEY as that server needs.
import OpenAI from "openai";

import { Conversation, Guard, guardFetch } from "kvlint-cache";

const FILES = { "README.md": "# acme\nA demo repository.", "main.py": "print('hi')" };

function runTool(name, args) {
  return name === "list_files" ? Object.keys(FILES).join("\n") : (FILES[JSON.parse(args).path] ?? "no such file");
}

const fetch = guardFetch(() => new Guard({ mode: "error" })); // refuses a cache break, unsent
const client = new OpenAI({
  baseURL: process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080/v1",
  apiKey: process.env.OPENAI_API_KEY ?? "none",
  fetch,
  maxRetries: 0,
});
const model = process.env.KVLINT_MODEL ?? "model";

const conversation = new Conversation();
conversation.addStatic("You are a file agent. Use the tools, then answer in one line.");
for (const name of ["list_files", "read_file"]) {
  conversation.addTool({
    type: "function",
    function: { name, description: `${name.replace("_", " ")}.`, parameters: { type: "object", properties: { path: { type: "string" } } } },
  });
}
conversation.pushUser("What does the README say?");
for (let turn = 0; turn < 3; turn += 1) {
  const response = await client.chat.completions.create({ ...conversation.toOpenAIChat(model), max_tokens: 32 });
  const calls = response.choices[0].message.tool_calls ?? [];
  conversation.pushOpenAIResponse(response);
  if (calls.length === 0) {
    // A model that answers without a tool (a tiny test model does): the agent asks again.
    conversation.pushUser(turn === 0 ? "List the files first." : "Now read the README.");
    continue;
  }
  for (const call of calls) {
    conversation.pushToolResult(call.id, runTool(call.function.name, call.function.arguments));
  }
}
const [guard] = fetch.kvlintGuard.guards.values();
const { turns, reusedTokens } = guard.counters;
console.log(`kvlint: ${turns} turns, ${reusedTokens} prompt tokens reusable from the turn before, no cache break`);
