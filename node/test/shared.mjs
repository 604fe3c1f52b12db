// What the package's tests share.
import assert from "node:assert/strict";
import { createServer } from "node:net";

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

/** A port free on the loopback interface now, for a server a test starts. */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}
