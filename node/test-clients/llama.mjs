// A real llama-server for the clients' tests: the binary scripts/build-llama-server.sh builds
// and the tiny random-weight Qwen2 model scripts/make-tiny-model.py makes (its real tokenizer
// and chat template) with its random vision projector (scripts/make-tiny-mmproj.py), started
// with the flags python/tests/conftest.py starts it with. It
// serves OpenAI Chat Completions and Responses under /v1 and Anthropic Messages at /v1/messages.
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";

import { freePort } from "../test/shared.mjs";

const cache = process.env.KVLINT_CACHE ?? join(homedir(), ".cache/kvlint");

function binaryAndModel() {
  const binary =
    process.env.KVLINT_LLAMA_SERVER ??
    readdirSync(cache)
      .filter((name) => name.startsWith("llama-server-"))
      .map((name) => join(cache, name, "llama-server"))
      .find(existsSync);
  const model = process.env.KVLINT_TINY_MODEL ?? join(cache, "tiny-qwen2.gguf");
  const mmproj = process.env.KVLINT_TINY_MMPROJ ?? join(cache, "tiny-qwen2-mmproj.gguf");
  if (!binary || !existsSync(model) || !existsSync(mmproj)) {
    throw new Error(
      "llama-server, the tiny model or its projector missing: run scripts/build-llama-server.sh, " +
        "scripts/make-tiny-model.py and scripts/make-tiny-mmproj.py (or set KVLINT_LLAMA_SERVER, " +
        "KVLINT_TINY_MODEL, KVLINT_TINY_MMPROJ)",
    );
  }
  return { binary, model, mmproj };
}

/** Starts llama-server; resolves with its URL and a `stop()`. */
export async function startLlamaServer() {
  const { binary, model, mmproj } = binaryAndModel();
  const port = await freePort();
  // The projector makes the server take images.
  const args = ["-m", model, "--mmproj", mmproj, "--host", "127.0.0.1", "--port", String(port), "--jinja", "--metrics", "-np", "1", "-c", "8192"];
  const child = spawn(binary, args, { stdio: "ignore" });
  let exited = null;
  child.on("exit", (code) => {
    exited = code;
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited !== null) {
      throw new Error(`llama-server exited with ${exited}`);
    }
    try {
      if ((await fetch(`${url}/health`)).ok) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error("llama-server did not answer /health within 60 s");
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    url,
    stop: () => new Promise((resolve) => (exited !== null ? resolve() : (child.on("exit", resolve), child.kill()))),
  };
}

/** A `fetch` that counts the prompt requests it sends, for proving what never left. */
export function countingFetch() {
  const sent = [];
  const send = (input, init) => {
    if ((init?.method ?? "GET").toUpperCase() === "POST") {
      sent.push(typeof init.body === "string" ? init.body : "");
    }
    return fetch(input, init);
  };
  return Object.assign(send, { sent });
}

/** A llama-server for a test file under Node's test runner: started before its tests, stopped
 * after them. Returns a getter: the server is there once the tests run. */
export function llamaServerForTests() {
  let server;
  before(async () => {
    server = await startLlamaServer();
  });
  after(async () => {
    await server?.stop();
  });
  return () => server;
}

/** A system prompt long enough to be cached (about 340 tokens). */
export { RULES } from "../test/shared.mjs";
