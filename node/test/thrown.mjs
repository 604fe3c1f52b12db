// What the package's tests share.
import assert from "node:assert/strict";

/** What `run` threw; fails the test when it threw nothing. */
export function thrown(run) {
  try {
    run();
  } catch (error) {
    return error;
  }
  assert.fail("nothing was thrown");
}
