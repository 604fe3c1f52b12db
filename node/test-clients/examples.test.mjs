// The guide's examples (node/examples), each run as a user runs it, against llama-server: each
// finishes without a cache break and says so on its last line.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { llamaServerForTests } from "./llama.mjs";

const examples = join(dirname(fileURLToPath(import.meta.url)), "..", "examples");

const llama = llamaServerForTests();

for (const example of readdirSync(examples).filter((name) => name.endsWith(".mjs")).sort()) {
  test(`examples/${example} runs without a cache break`, async () => {
    // The Anthropic client appends /v1/messages itself; the OpenAI-shaped ones take /v1.
    const baseURL = example.startsWith("anthropic") ? llama().url : `${llama().url}/v1`;
    const { stdout } = await promisify(execFile)(process.execPath, [join(examples, example)], {
      env: { ...process.env, KVLINT_BASE_URL: baseURL, KVLINT_MODEL: "tiny-qwen2" },
      timeout: 120_000,
    });
    const last = stdout.trim().split("\n").at(-1);
    assert.match(last, /^kvlint: \d+ turns, .*no cache break$/, stdout);
  });
}
