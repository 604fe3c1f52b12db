// What the package's tests share.
import assert from "node:assert/strict";

/** A system prompt long enough to be cached (about 340 tokens). */
export const RULES = "You are a careful coding agent: read before you write, and test what you change. ".repeat(20);

/** What `run` threw; fails the test when it threw nothing. */
export function thrown(run) {
  try {
    run();
  } catch (error) {
    return error;
  }
  assert.fail("nothing was thrown");
}
