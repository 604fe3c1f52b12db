// What the guard on the wire keeps: a long-running service's memory stays bounded.
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";

import { Guard, GuardError, GuardSessions, guardFetch } from "kvlint-cache";

import { RULES } from "./shared.mjs";

/** Turn `turn` of session `key`, its system prompt opening with `time`. */
function body(key, turn, time = "10:00") {
  const messages = [{ role: "system", content: `Time: ${time}\n${RULES}` }, { role: "user", content: "Hi." }];
  for (let step = 1; step <= turn; step += 1) {
    messages.push({ role: "assistant", content: `Step ${step} done.` }, { role: "user", content: "Go on." });
  }
  return JSON.stringify({ model: "gpt-4o", prompt_cache_key: key, messages });
}

test("the sessions keep the latest bodies and the guards of the most recently used sessions", () => {
  const sessions = new GuardSessions(() => new Guard(), { warn: false, keepBodies: 2, maxSessions: 2 });
  sessions.observe(body("a", 0));
  sessions.observe(body("b", 0));
  sessions.observe(body("a", 1)); // a is now the most recently used
  sessions.observe(body("c", 0)); // a third session: b, the least recently used, is dropped
  assert.deepEqual([...sessions.guards.keys()], ["a", "c"]);
  assert.deepEqual(
    sessions.observed.map((entry) => entry.key),
    ["a", "c"],
  );
  // a's guard remembers its last turn, so a's rewritten prefix is reported …
  const kept = sessions.observe(body("a", 2, "10:05"));
  assert.deepEqual(
    kept.errors().map((finding) => finding.rule),
    ["volatile-timestamp"],
  );
  // … while b's next turn starts a new guard, a first turn with nothing to compare.
  assert.equal(sessions.observe(body("b", 1, "10:05")).findings.length, 0);
  assert.deepEqual([...sessions.guards.keys()], ["a", "b"]);
});

test("the bounds are positive counts", () => {
  for (const options of [{ keepBodies: 0 }, { maxSessions: 1.5 }, { keepBodies: Number.NaN }]) {
    assert.throws(() => new GuardSessions(undefined, options), RangeError);
  }
  assert.doesNotThrow(() => new GuardSessions(undefined, { keepBodies: Infinity, maxSessions: Infinity }));
});

test("the sessions observe through the guards the factory made, and a retry follows the refusal", () => {
  const made = [];
  const sessions = new GuardSessions(
    () => {
      const guard = new Guard({ mode: "error" });
      made.push(guard);
      return guard;
    },
    { warn: false },
  );
  sessions.observe(body("a", 1));
  sessions.observe(body("b", 1));
  assert.equal(made.length, 2);
  assert.equal(sessions.guardFor("a"), made[0]);
  // a's rewritten prefix is refused, and so is the client's retry of that body …
  const rewritten = body("a", 2, "10:05");
  assert.throws(() => sessions.observe(rewritten), GuardError);
  assert.throws(() => sessions.observe(rewritten, [], 1), GuardError);
  // … which the guard saw once.
  assert.deepEqual([made[0].counters.turns, made[0].counters.refusedTurns], [2, 1]);
  // Announced on the application's own guard, the break is let through.
  made[0].expectBreak();
  assert.equal(sessions.observe(rewritten).errors().length, 1);
  // An accepted body's retry is not observed again.
  assert.equal(sessions.observe(rewritten, [], 1), undefined);
  assert.equal(made[0].counters.turns, 3);
});

test("a retry of a new session's body forgets no guard the sessions keep", () => {
  const sessions = new GuardSessions(() => new Guard(), { warn: false, maxSessions: 1 });
  sessions.observe(body("a", 0));
  // A retry is not observed, so at the bound it drops nothing …
  assert.equal(sessions.observe(body("b", 1), [], 1), undefined);
  assert.deepEqual([...sessions.guards.keys()], ["a"]);
  assert.ok(sessions.guardFor("a") instanceof Guard);
  // … and a new session's first body does.
  sessions.observe(body("b", 0));
  assert.deepEqual([...sessions.guards.keys()], ["b"]);
});

test("a warning names the application's call that sent the request, as a refusal's stack does", async () => {
  // The network answers nothing: what is tested is the warning the guard emits before sending.
  const guarded = guardFetch(undefined, { fetch: async () => new Response("{}") });
  const sendTurn = (turn, time) =>
    guarded("https://api.openai.com/v1/chat/completions", { method: "POST", body: body("w", turn, time) });
  await sendTurn(0, "10:00");
  const warned = once(process, "warning");
  await sendTurn(1, "10:05");
  const [warning] = await warned;
  assert.equal(warning.name, "CacheWarning");
  assert.equal(warning.code, "KVLINT_CACHE");
  assert.match(warning.message, /volatile-timestamp/);
  assert.match(warning.message, /\n  sent at sendTurn \(.*fetch\.test\.mjs:\d+:\d+\)/);
  assert.match(warning.stack, /fetch\.test\.mjs/);
});
