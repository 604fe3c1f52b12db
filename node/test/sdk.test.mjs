// The package's API from an ES module, against its Rust engine: the conversation's tiers and
// history, the guard, `check`, the typed errors, and key order kept through the binding.
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import {
  Conversation,
  ConversationError,
  Guard,
  GuardError,
  JSONValueError,
  check,
  opensConversation,
  sessionKey,
  sessionOfText,
} from "kvlint-cache";

import { RULES, thrown } from "./shared.mjs";

function readFile(description = "Read a file of the repository.") {
  return {
    type: "function",
    function: {
      name: "read_file",
      description,
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  };
}

const runTests = {
  type: "function",
  function: { name: "run_tests", description: "Run the tests.", parameters: { type: "object", properties: {} } },
};

/** A few turns of an agent, each body extending the one before. */
function agentTurns(conversation) {
  conversation.addStatic(RULES);
  conversation.addTool(readFile());
  conversation.addTool(runTests);
  const bodies = [];
  conversation.pushUser("Why does the parser test fail?");
  bodies.push(conversation.toOpenAIChat("gpt-4o"));
  conversation.pushAssistant("", [{ id: "call_1", name: "read_file", arguments: '{"path": "parser.rs"}' }]);
  conversation.pushToolResult("call_1", "fn parse() { todo!() }");
  bodies.push(conversation.toOpenAIChat("gpt-4o"));
  conversation.pushAssistant("The parser is not written yet.");
  conversation.pushUser("Write it.");
  bodies.push(conversation.toOpenAIChat("gpt-4o"));
  return bodies;
}

test("each turn extends the last byte for byte, and the guard finds nothing", () => {
  const guard = new Guard({ mode: "error" });
  const bodies = agentTurns(new Conversation());
  for (const [index, body] of bodies.entries()) {
    const outcome = guard.observe(body);
    assert.ok(outcome.isClean(), `turn ${index}: ${JSON.stringify(outcome.findings)}`);
    if (index > 0) {
      const before = JSON.stringify(bodies[index - 1].messages).slice(0, -1);
      assert.ok(JSON.stringify(body.messages).startsWith(before), `turn ${index}`);
    }
  }
  assert.equal(guard.counters.turns, 3);
  assert.ok(guard.counters.reusedTokens > 0);
  const report = check(bodies);
  assert.equal(report.findings.length, 0);
  assert.ok(report.reusedTokens > 0 && report.reusedTokens < report.promptTokens);
});

test("tools are sent in one order whatever order they were added in", () => {
  const [first, second] = [new Conversation(), new Conversation()];
  first.addTool(readFile());
  first.addTool(runTests);
  second.addTool(runTests);
  second.addTool(readFile());
  for (const conversation of [first, second]) {
    conversation.pushUser("Go.");
  }
  assert.deepEqual(JSON.stringify(first.toAnthropic("claude")), JSON.stringify(second.toAnthropic("claude")));
});

test("turn context goes last, after the history", () => {
  const conversation = new Conversation();
  conversation.addStatic(RULES);
  conversation.addTurnContext("Current time: 2026-12-01T10:00:00Z");
  conversation.pushUser("Hello.");
  const messages = conversation.toOpenAIChat("gpt-4o").messages;
  assert.match(JSON.stringify(messages.at(-1)), /2026-12-01T10:00:00Z/);
  assert.doesNotMatch(JSON.stringify(messages[0]), /2026-12-01/);
});

test("a change to a committed tier warns at the call, or throws in strict mode", async () => {
  const conversation = new Conversation();
  conversation.addStatic(RULES);
  conversation.pushUser("Hello.");
  conversation.toOpenAIChat("gpt-4o");
  const warned = once(process, "warning");
  const change = conversation.addStatic("One more rule.");
  assert.deepEqual([change.applied, change.deferred], [false, true]);
  assert.ok(change.costBlocks > 0);
  const [warning] = await warned;
  assert.equal(warning.name, "CacheWarning");
  assert.match(warning.message, /travels as a note in the next message until compaction/);

  const strict = new Conversation({ strict: true });
  assert.equal(strict.isStrict, true);
  strict.addStatic(RULES);
  strict.pushUser("Hello.");
  strict.toOpenAIChat("gpt-4o");
  assert.throws(() => strict.addStatic("One more rule."), ConversationError);
});

test("a timestamp in the static tier is named at the call", async () => {
  const conversation = new Conversation();
  const warned = once(process, "warning");
  const change = conversation.addStatic(`${RULES}\nCurrent time: 2026-12-01T10:00:00Z`);
  assert.equal(change.volatile[0].rule, "volatile-timestamp");
  const [warning] = await warned;
  assert.match(warning.message, /addTurnContext/);
});

test("the guard reports a rewritten prefix, and refuses it in error mode", () => {
  const bodies = agentTurns(new Conversation());
  const rewritten = structuredClone(bodies[2]);
  rewritten.messages[0].content = `Current time: 2026-12-01T10:04:31Z\n${rewritten.messages[0].content}`;
  const warn = new Guard();
  warn.observe(bodies[0]);
  warn.observe(bodies[1]);
  const outcome = warn.observe(rewritten);
  assert.equal(outcome.isClean(), false);
  assert.ok(outcome.tokensLost > 0);
  assert.equal(warn.mode, "warn");

  const refuse = new Guard({ mode: "error" });
  refuse.observe(bodies[0]);
  refuse.observe(bodies[1]);
  const error = thrown(() => refuse.observe(rewritten));
  assert.ok(error instanceof GuardError, String(error));
  assert.match(error.message, /^turn 2: /);
  assert.deepEqual(error.findings, refuse.findings);
  assert.ok(error.findings.some((finding) => finding.severity === "error" && finding.tokensLost > 0));
  assert.throws(() => new Guard({ mode: "loud" }), ConversationError);
});

test("an announced compaction is counted, not reported", () => {
  const conversation = new Conversation();
  const guard = new Guard({ mode: "error" });
  for (const body of agentTurns(conversation)) {
    guard.observe(body);
  }
  const cacheBreak = conversation.compact(1, { summary: "We looked at the parser." });
  assert.ok(cacheBreak.droppedMessages > 0);
  guard.expectBreak();
  assert.equal(guard.isBreakExpected, true);
  assert.ok(guard.observe(conversation.toOpenAIChat("gpt-4o")).errors().length === 0);
  assert.equal(guard.counters.expectedBreaks, 1);
});

test("a conversation saved and restored sends the same bytes", () => {
  const conversation = new Conversation();
  agentTurns(conversation);
  const saved = JSON.stringify(conversation);
  const restored = Conversation.fromJSON(saved);
  assert.equal(JSON.stringify(restored), saved);
  for (const render of ["toOpenAIChat", "toOpenAIResponses", "toAnthropic"]) {
    assert.equal(JSON.stringify(restored[render]("m")), JSON.stringify(conversation[render]("m")), render);
  }
  assert.equal(restored.routingKey, conversation.routingKey);
  assert.throws(() => Conversation.fromJSON("{}"), ConversationError);
});

test("a body's key order crosses the binding as JSON.stringify writes it", () => {
  // Two bodies whose tool schemas differ only in the order of their properties: a prompt
  // renders a schema as its JSON text, so the prefix changes. With keys sorted on the way in,
  // the guard would see the same schema twice.
  const schema = (properties) => ({
    type: "function",
    function: { name: "search", description: "Search the code.", parameters: { type: "object", properties } },
  });
  const body = (properties, messages) => ({
    model: "gpt-4o",
    messages: [{ role: "system", content: RULES }, ...messages],
    tools: [schema(properties)],
  });
  const first = [{ role: "user", content: "Find the parser." }];
  const ordered = { query: { type: "string" }, limit: { type: "integer" } };
  const reordered = { limit: { type: "integer" }, query: { type: "string" } };
  const next = [...first, { role: "assistant", content: "Found it." }, { role: "user", content: "Open it." }];
  const guard = new Guard();
  assert.ok(guard.observe(body(ordered, first)).isClean());
  assert.ok(guard.observe(body(ordered, next)).isClean());
  const outcome = guard.observe(body(reordered, [...next, { role: "assistant", content: "Done." }, { role: "user", content: "Go." }]));
  assert.equal(outcome.isClean(), false, "the reordered keys were seen");
  // A conversation read from a body gives the body's messages back byte for byte.
  const conversation = Conversation.fromBody(body(ordered, next));
  assert.equal(JSON.stringify(conversation.toOpenAIChat("gpt-4o").messages), JSON.stringify(body(ordered, next).messages));
});

test("what JSON cannot carry is a typed error naming its place, before anything is sent", () => {
  const cycle = { role: "user" };
  cycle.content = [{ type: "text", text: "x", self: cycle }];
  const cases = [
    [{ messages: [{ role: "user", content: "x", n: 1n }] }, "body.messages[0].n", /BigInt/],
    [{ messages: [cycle] }, "body.messages[0].content[0].self", /cycle/],
    [{ messages: [{ role: "user", content: [undefined] }] }, "body.messages[0].content[0]", /undefined/],
    [{ messages: [() => 1] }, "body.messages[0]", /function/],
    [{ temperature: Number.NaN, messages: [] }, "body.temperature", /NaN/],
    [{ metadata: new Map([["a", 1]]), messages: [] }, "body.metadata", /Map/],
    [{ "odd key": [Symbol("s")], messages: [] }, 'body["odd key"][0]', /symbol/],
  ];
  for (const [body, path, what] of cases) {
    const error = thrown(() => new Guard().observe(body));
    assert.ok(error instanceof JSONValueError && error instanceof TypeError, String(error));
    assert.equal(error.path, path);
    assert.match(error.message, what);
  }
  // An object's undefined value is left out, as JSON.stringify leaves it out.
  assert.ok(new Guard().observe({ model: "m", user: undefined, messages: [{ role: "user", content: "x" }] }).isClean());
});

test("an input the provider would reject is refused at the call", () => {
  const conversation = new Conversation();
  assert.throws(() => conversation.pushUser([{ type: "hologram" }]), ConversationError);
  assert.throws(() => conversation.pushUser(42), ConversationError);
  assert.throws(() => conversation.pushToolResult("nobody_called_this", "x"), ConversationError);
  assert.throws(() => conversation.compact(-1), ConversationError);
  assert.throws(() => check("not an array"), ConversationError);
});

test("session keys and first turns read as the Python package reads them", () => {
  const body = { model: "m", messages: [{ role: "user", content: "Hi." }] };
  assert.equal(opensConversation(body), true);
  assert.equal(sessionKey(body), "");
  assert.equal(sessionKey(body, [["x-kvlint-routing-key", "abc"]]), "abc");
  assert.equal(sessionKey({ ...body, prompt_cache_key: "k1" }), "k1");
  // The wire text, read once: what a fetch guard reads.
  assert.deepEqual(sessionOfText(JSON.stringify({ ...body, user: "u7" })), { key: "u7", opens: true });
  assert.equal(sessionOfText("[1, 2]"), undefined);
  assert.equal(sessionOfText("not json"), undefined);
});
