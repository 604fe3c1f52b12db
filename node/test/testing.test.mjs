// The test helpers on recorded sessions: the assertion's message is kvlint's own, and it takes
// each thing there is to judge.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Guard, GuardSessions, assertPrefixStable, check, kvlintMatchers } from "kvlint-cache";

import { RULES, thrown } from "./shared.mjs";

/** Two turns whose system prompts start with the time given for each. */
function session(firstTime, secondTime = firstTime) {
  const system = (time) => `Current time: ${time}\n${RULES}`;
  const first = { model: "gpt-4o", messages: [{ role: "system", content: system(firstTime) }, { role: "user", content: "Hi." }] };
  const second = {
    model: "gpt-4o",
    messages: [
      { role: "system", content: system(secondTime) },
      { role: "user", content: "Hi." },
      { role: "assistant", content: "Hello." },
      { role: "user", content: "Go on." },
    ],
  };
  return [first, second];
}

test("a recorded session that keeps its prefix passes, one that rewrites it fails with kvlint's message", () => {
  assertPrefixStable(session("2026-12-01T10:00:00Z"));
  const broken = session("2026-12-01T10:00:00Z", "2026-12-01T10:04:31Z");
  const error = thrown(() => assertPrefixStable(broken));
  assert.ok(error instanceof assert.AssertionError);
  const [finding] = check(broken).errors();
  assert.equal(
    error.message,
    `kvlint: 1 cache break(s) in the prompts sent:\n${finding.rule} (turn 1, ${finding.part}): ${finding.message}`,
  );
});

test("the assertion takes an outcome, findings, or a guarded fetch's sessions", () => {
  const broken = session("2026-12-01T10:00:00Z", "2026-12-01T10:04:31Z");
  const report = check(broken);
  for (const recorded of [report, report.findings]) {
    assert.throws(() => assertPrefixStable(recorded), /kvlint: 1 cache break/);
  }
  const sessions = new GuardSessions(() => new Guard(), { warn: false });
  for (const body of broken) {
    sessions.observe(JSON.stringify(body));
  }
  assert.throws(() => assertPrefixStable(sessions), /volatile-timestamp \(turn 1/);
  assert.throws(() => assertPrefixStable("bodies"), TypeError);
});

test("vitest's matcher says the same as the assertion", () => {
  const kept = kvlintMatchers.toKeepItsPrefix(session("2026-12-01T10:00:00Z"));
  assert.equal(kept.pass, true);
  const broken = kvlintMatchers.toKeepItsPrefix(session("2026-12-01T10:00:00Z", "2026-12-01T10:04:31Z"));
  assert.equal(broken.pass, false);
  assert.match(broken.message(), /^kvlint: 1 cache break\(s\) in the prompts sent:\nvolatile-timestamp/);
});
