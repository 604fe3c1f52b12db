// The OpenAI Agents SDK: its default client given guardFetch, an agent with a tool, two runs
// on the growing history.
//
//   KVLINT_BASE_URL=http://127.0.0.1:8080/v1 node examples/agents.mjs
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";

import { Guard, guardFetch } from "kvlint-cache";

const fetch = guardFetch(() => new Guard({ mode: "error" }));
const baseURL = process.env.KVLINT_BASE_URL ?? "http://127.0.0.1:8080/v1";
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: process.env.OPENAI_API_KEY ?? "none", fetch, maxRetries: 0 }));
setOpenAIAPI("chat_completions");
setTracingDisabled(true);

const readFile = tool({
  name: "read_file",
  description: "Read a file of the repository.",
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => `contents of ${path}`,
});
const agent = new Agent({
  name: "coder",
  instructions: "You are a coding agent. Read before you answer.",
  model: process.env.KVLINT_MODEL ?? "model",
  tools: [readFile],
  modelSettings: { maxTokens: 32 },
});
const first = await run(agent, "What does main.py do?");
await run(agent, [...first.history, { role: "user", content: "And the README?" }]);
console.log(`kvlint: ${fetch.kvlintGuard.observed.length} turns, no cache break`);
