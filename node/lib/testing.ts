/**
 * Tests that the prompts an agent sends keep their cached prefix: the TypeScript twin of the
 * Python package's pytest plugin, for Node's test runner and vitest.
 *
 * - {@link recordPrompts}: while it lasts, every prompt request sent through the global
 *   `fetch` (so by every client built meanwhile that does not bring its own) goes through a
 *   fresh warn-mode {@link Guard} per session; nothing is refused, the findings are kept.
 * - {@link assertPrefixStable}: throws an `AssertionError` with each error finding's rule,
 *   turn and message, kvlint's own words; for any test runner.
 * - {@link kvlintMatchers}: `expect.extend(kvlintMatchers)` in vitest gives
 *   `expect(recorded).toKeepItsPrefix()`.
 *
 * Each takes what there is to judge: the recorder, a guarded `fetch`'s sessions
 * (`fetch.kvlintGuard`), an {@link Outcome} or {@link Report}, a list of findings, or a recorded
 * session (an array of request bodies, checked as `kvlint check` checks it).
 */

import { AssertionError } from "node:assert";

import { formatFindings, guardFetch, GuardSessions } from "./fetch";
import { check, type Finding, Guard, Outcome } from "./sdk";

/** The prompts recorded by {@link recordPrompts}, and their findings. */
export class PromptRecorder {
  /** Recorded here, reported by the assertion: no `CacheWarning` on the way. */
  readonly sessions = new GuardSessions(() => new Guard(), { warn: false, keepBodies: Infinity, maxSessions: Infinity });
  readonly #original: typeof fetch;

  constructor() {
    this.#original = globalThis.fetch;
    globalThis.fetch = guardFetch(this.sessions, { fetch: this.#original });
  }

  /** Every observed request body, as sent, in order. */
  get bodies(): string[] {
    return this.sessions.observed.map((entry) => entry.body);
  }

  /** Every finding, in order of the requests. */
  get findings(): Finding[] {
    return this.sessions.observed.flatMap((entry) => entry.outcome.findings);
  }

  /** The error findings: cached content recomputed. */
  errors(): Finding[] {
    return this.findings.filter((finding) => finding.severity === "error");
  }

  /** Puts the global `fetch` back. */
  restore(): void {
    globalThis.fetch = this.#original;
  }

  [Symbol.dispose](): void {
    this.restore();
  }
}

/** Records every prompt request sent through the global `fetch` until `restore()`. */
export function recordPrompts(): PromptRecorder {
  return new PromptRecorder();
}

/** What {@link assertPrefixStable} and the matcher judge. */
export type Recorded = PromptRecorder | GuardSessions | Outcome | Finding[] | object[];

/** The error findings of what was recorded. */
function errorsOf(recorded: Recorded): Finding[] {
  if (recorded instanceof PromptRecorder) {
    return recorded.errors();
  }
  if (recorded instanceof GuardSessions) {
    return recorded.observed.flatMap((entry) => entry.outcome.errors());
  }
  if (recorded instanceof Outcome) {
    return recorded.errors();
  }
  if (!Array.isArray(recorded)) {
    throw new TypeError("expected a recorder, GuardSessions, an Outcome, findings or request bodies");
  }
  const items: unknown[] = recorded;
  const isFinding = (item: unknown): item is Finding =>
    typeof item === "object" && item !== null && "rule" in item && "severity" in item && "turn" in item;
  const findings = items.length > 0 && items.every(isFinding) ? items : check(recorded).findings;
  return findings.filter((finding) => finding.severity === "error");
}

/** The failure message for `errors`, or undefined when there are none. */
function failure(errors: Finding[]): string | undefined {
  if (errors.length === 0) {
    return undefined;
  }
  return `kvlint: ${errors.length} cache break(s) in the prompts sent:\n${formatFindings(errors)}`;
}

/** Throws an `AssertionError` naming each cache break of what was recorded. */
export function assertPrefixStable(recorded: Recorded): void {
  const message = failure(errorsOf(recorded));
  if (message !== undefined) {
    throw new AssertionError({ message });
  }
}

/** vitest's matchers: `expect.extend(kvlintMatchers)`, then
 * `expect(recorded).toKeepItsPrefix()` (and `.not.toKeepItsPrefix()`). */
export const kvlintMatchers = {
  toKeepItsPrefix(recorded: Recorded): { pass: boolean; message: () => string } {
    const message = failure(errorsOf(recorded));
    return {
      pass: message === undefined,
      message: () => message ?? "kvlint: expected a cache break, and every prompt kept its prefix",
    };
  },
};
