// The package in Cloudflare's Workers runtime, where no native addon loads: a Worker bundled
// by wrangler as `wrangler deploy` bundles it (the `workerd` condition picks the WebAssembly
// build), served by workerd, the runtime Cloudflare runs (both from the npm registry). What it
// answers must be what the same scenario gives in Node on the native module.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import * as kvlint from "kvlint-cache";

import { freePort } from "../test/shared.mjs";
import { scenario } from "./scenario.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const tools = join(here, "..", "node_modules", ".bin");

/** wrangler.toml's `key`, a string or an array of strings, as JSON. */
function wranglerSetting(key) {
  const line = readFileSync(join(here, "wrangler.toml"), "utf8").match(new RegExp(`^${key} = (.+)$`, "m"));
  assert.ok(line, `wrangler.toml sets no ${key}`);
  return JSON.parse(line[1]);
}

/** workerd's configuration: the bundle and its WebAssembly module, served on `port`, under the
 * compatibility settings wrangler bundled it for. */
function config(bundle, wasm, port) {
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker)],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [
    (name = "${bundle}", esModule = embed "${bundle}"),
    (name = "${wasm}", wasm = embed "${wasm}"),
  ],
  compatibilityDate = ${JSON.stringify(wranglerSetting("compatibility_date"))},
  compatibilityFlags = ${JSON.stringify(wranglerSetting("compatibility_flags"))},
);
`;
}

/** The JSON `url` answers once the server is up (30 s at most); its log on failure. */
async function answerOf(url, log) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(url);
      assert.equal(response.status, 200, await response.clone().text());
      return await response.json();
    } catch (error) {
      if (Date.now() > deadline || error instanceof assert.AssertionError) {
        throw new Error(`workerd did not answer: ${error.message}\n${log()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

test("in the Workers runtime the WebAssembly build says what the native module says", async (t) => {
  const out = mkdtempSync(join(tmpdir(), "kvlint-workers-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  // On this Node (wrangler needs 22), not the one its script's `env node` would find.
  const wrangler = join(here, "..", "node_modules", "wrangler", "bin", "wrangler.js");
  execFileSync(process.execPath, [wrangler, "deploy", "--dry-run", "--outdir", out], {
    cwd: here,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
    stdio: "pipe",
  });
  const files = readdirSync(out);
  const wasm = files.find((file) => file.endsWith("kvlint_bg.wasm"));
  assert.ok(wasm, `wrangler bundled no WebAssembly module: ${files}`);
  assert.ok(files.includes("worker.js"), `${files}`);
  assert.doesNotMatch(readFileSync(join(out, "worker.js"), "utf8"), /\.node\b["']/, "the bundle loads a native addon");
  // Cloudflare refuses a Worker over 10 MB compressed (3 MB on the free plan):
  // https://developers.cloudflare.com/workers/platform/limits/#worker-size
  const compressed = files.reduce((sum, file) => sum + gzipSync(readFileSync(join(out, file))).length, 0);
  assert.ok(compressed < 10 * 1024 * 1024, `the Worker is ${compressed} bytes gzipped, over Cloudflare's 10 MB`);

  const port = await freePort();
  writeFileSync(join(out, "config.capnp"), config("worker.js", wasm, port));
  let log = "";
  const workerd = spawn(join(tools, "workerd"), ["serve", join(out, "config.capnp")], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  workerd.stdout.on("data", (chunk) => (log += chunk));
  workerd.stderr.on("data", (chunk) => (log += chunk));
  t.after(() => workerd.kill());

  const inWorkers = await answerOf(`http://127.0.0.1:${port}/`, () => log);
  const inNode = JSON.parse(JSON.stringify(scenario(kvlint)));
  assert.deepEqual(inWorkers, inNode);
  // What the scenario planted, found where it was planted: the timestamp on turn 3, the
  // reordered tools on turn 4 (an expected break), nothing before.
  const rules = inWorkers.observed.map((findings) => findings.map((finding) => [finding.rule, finding.part]));
  assert.deepEqual(rules, [[], [], [], [["prefix-edit", "messages[0].content"]], [["tool-order", "tools[0]"]]]);
  assert.equal(inWorkers.counters.expectedBreaks, 1);
});
