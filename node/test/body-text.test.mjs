// The guard's `observe` serializes only what a body adds: the text it hands over must be
// JSON.stringify's, whatever the application did to the objects between turns.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Guard, JSONValueError } from "kvlint-cache";

import { BodyText, utf8 } from "../dist/internal/body-text.js";

/** A seeded generator, so a failure is the same on every run. */
function seeded(seed) {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

class Point {
  constructor(x) {
    this.x = x;
  }
}

/** Values JSON.stringify writes in ways a walk could get wrong. */
const ODD_VALUES = [
  -0, 1e21, 0.1, "é\u{1F600}\n\"\\", "\uD800 lone", new Date(0), { toJSON: (key) => `key ${key}` },
  new Point(3), Object.assign(Object.create(null), { b: 1, a: 2 }), { 2: "two", b: "b", 1: "one" },
  { dropped: undefined, kept: null, f() {} }, [1, [2, [3]]], true, "true", null, 1, "1", [1], ["1"],
];

/** Changes one place of the body, in place or not, as an application might between turns. */
function mutate(body, random) {
  const pick = (array) => array[Math.floor(random() * array.length)];
  const messages = body.messages;
  const message = pick(messages);
  switch (Math.floor(random() * 12)) {
    case 0:
      messages.push({ role: pick(["user", "assistant"]), content: `turn ${messages.length}` });
      break;
    case 1:
      message.content = `${message.content} edited`; // in place: same object, new text
      break;
    case 2:
      message.extra = pick(ODD_VALUES);
      break;
    case 3: {
      // The same keys in another order.
      const entries = Object.entries(message).reverse();
      messages[messages.indexOf(message)] = Object.fromEntries(entries);
      break;
    }
    case 4:
      messages[messages.indexOf(message)] = structuredClone({ ...message, extra: undefined });
      break;
    case 5:
      body.metadata = pick(ODD_VALUES);
      break;
    case 6:
      body.tools = [{ type: "function", function: { name: pick(["a", "b"]), parameters: { type: "object" } } }];
      break;
    case 7:
      delete message.extra;
      break;
    case 8:
      // Long and multi-byte: the encoded text outgrows its buffer.
      messages.push({ role: "user", content: "é\u{1F600} ".repeat(Math.floor(random() * 8_000)) });
      break;
    case 9:
      messages.splice(1 + Math.floor(random() * (messages.length - 1)), 2); // the first stays
      break;
    case 10:
      // Keys in the other order, their values equal.
      message.order = Object.keys(message.order ?? {})[0] === "x" ? { y: 1, x: 1 } : { x: 1, y: 1 };
      break;
    default:
      body.messages = [...messages]; // a new array of the same objects
  }
}

test("each body's text is JSON.stringify's, in UTF-8, through edits in place, reorders and odd values", () => {
  const random = seeded(11);
  const serialize = (value) => {
    if (typeof value === "object" && value !== null && "refused" in value) {
      throw new TypeError("refused");
    }
    return JSON.stringify(value);
  };
  for (let session = 0; session < 40; session += 1) {
    const bodyText = new BodyText(serialize);
    const body = { model: "m", messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "hi" }] };
    for (let turn = 0; turn < 30; turn += 1) {
      const where = `session ${session} turn ${turn}`;
      if (random() < 0.1) {
        // A body refused half-way leaves nothing behind for the next.
        body.messages.push({ role: "user", refused: true });
        assert.throws(() => bodyText.utf8(body, "body"), /refused/, where);
        body.messages.pop();
      }
      assert.equal(bodyText.pieces(body, "body").join(""), JSON.stringify(body), where);
      assert.deepEqual(bodyText.utf8(body, "body"), new TextEncoder().encode(JSON.stringify(body)), where);
      mutate(body, random);
    }
  }
  assert.deepEqual(utf8("é\u{1F600}\"\n"), new TextEncoder().encode("é\u{1F600}\"\n"));
});

test("the guard sees a message edited in place, as it sees the same text sent fresh", () => {
  const [guard, shadow] = [new Guard(), new Guard()];
  const messages = [{ role: "system", content: "Be terse." }, { role: "user", content: "Plan the work." }];
  const send = () => {
    const body = { model: "gpt-4o", messages };
    const outcome = guard.observe(body);
    assert.deepEqual(outcome.findings, shadow.observeText(JSON.stringify(body)).findings);
    return outcome;
  };
  assert.ok(send().isClean());
  messages.push({ role: "assistant", content: "Done." }, { role: "user", content: "Next." });
  assert.ok(send().isClean());
  messages[0].content = "Be terse. Now: 10:02:11."; // the same object, rewritten
  const outcome = send();
  assert.equal(outcome.errors().length, 1, JSON.stringify(outcome.findings));
  assert.deepEqual(guard.counters, shadow.counters);
});

test("what a later turn adds that JSON cannot carry is refused at its place", () => {
  const guard = new Guard();
  const messages = [{ role: "user", content: "hi" }];
  const body = { model: "m", messages };
  guard.observe(body);
  messages.push({ role: "assistant", content: "ok", tokens: 3n });
  const error = (() => {
    try {
      guard.observe(body);
    } catch (thrown) {
      return thrown;
    }
    return undefined;
  })();
  assert.ok(error instanceof JSONValueError, String(error));
  assert.equal(error.path, "body.messages[1].tokens");
  // A hole in the array, which JSON.stringify would send as null.
  const holes = { model: "m", messages: [{ role: "user", content: "hi" }] };
  holes.messages[2] = { role: "user", content: "again" };
  assert.throws(() => new Guard().observe(holes), (thrown) => thrown instanceof JSONValueError && thrown.path === "body.messages[1]");
  // A message that points back at the body it is in.
  messages[1] = { role: "assistant", content: "ok", body };
  assert.throws(() => guard.observe(body), (thrown) => thrown instanceof JSONValueError && thrown.path === "body.messages[1].body");
});
