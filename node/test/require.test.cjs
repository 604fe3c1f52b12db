// The CommonJS entry point gives the same classes as the ES module one.
const assert = require("node:assert/strict");
const { test } = require("node:test");

const kvlint = require("kvlint-cache");

test("require() loads the package and its engine", async () => {
  const esm = await import("kvlint-cache");
  assert.equal(kvlint.Conversation, esm.Conversation);
  const named = (module) => Object.keys(module).filter((name) => name !== "default" && name !== "__esModule").sort();
  assert.deepEqual(named(esm), named(kvlint), "index.mjs re-exports every name of the CommonJS build");
  assert.equal(kvlint.ROUTING_KEY_HEADER, "x-kvlint-routing-key");
  const conversation = new kvlint.Conversation();
  conversation.pushUser("Hi.");
  assert.deepEqual(conversation.toOpenAIChat("gpt-4o").messages, [{ role: "user", content: "Hi." }]);
});

// The engine is the native module, or the WebAssembly build under `--conditions=kvlint-wasm`
// (scripts/test-node.sh runs these tests both ways).
test("the engine loaded is the one the conditions select", () => {
  const engine = process.execArgv.includes("--conditions=kvlint-wasm")
    ? /wasm32[/\\]kvlint\.js$/
    : /native[/\\]native\.cjs$/;
  const loaded = Object.keys(require.cache);
  assert.ok(loaded.some((file) => engine.test(file)), `${engine} is not among ${loaded.join(", ")}`);
});
