// LangChain.js: ChatOpenAI given guardFetch through `configuration` (the openai client it
// builds takes it), with tools bound and a tool result in the history.
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080/v1 node examples/langchain.mjs
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";

import { Guard, guardFetch } from "kvlint-cache";

const fetch = guardFetch(() => new Guard({ mode: "error" }));
const chat = new ChatOpenAI({
  model: process.env.KVLINT_MODEL ?? "model",
  apiKey: process.env.OPENAI_API_KEY ?? "none",
  maxTokens: 32,
  maxRetries: 0, // a refused body would only be refused again
  configuration: { baseURL: process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080/v1", fetch },
});
const readFile = {
  type: "function",
  function: { name: "read_file", description: "Read a file.", parameters: { type: "object", properties: { path: { type: "string" } } } },
};
const model = chat.bindTools([readFile]);
const messages = [new SystemMessage("You are a coding agent. Read before you answer."), new HumanMessage("Why does the parser test fail?")];
messages.push(await model.invoke(messages));
messages.push(new HumanMessage("Read parser.rs."));
messages.push(new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: "read_file", args: { path: "parser.rs" } }] }));
messages.push(new ToolMessage({ tool_call_id: "call_1", content: "fn parse() { todo!() }" }));
messages.push(await model.invoke(messages));
console.log(`kvlint: ${fetch.kvlintGuard.observed.length} turns, no cache break`);
