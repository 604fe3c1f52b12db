/**
 * A guard on the wire: a `fetch` that passes the body of every prompt request to its session's
 * {@link Guard} before it is sent, exactly as it is sent. Every client that takes a `fetch`
 * option takes it: the official `openai` and `@anthropic-ai/sdk` clients, and the AI SDK's
 * providers (`createOpenAI`, `createOpenAICompatible`, `createAnthropic`).
 *
 * Which requests: POSTs whose path ends in a prompt endpoint (`/chat/completions`,
 * `/responses`, `/messages`: kvlint's protocol crate's list). Which session: a per-user or
 * per-session id the body carries, else its prefix key (`prompt_cache_key`, or the
 * `x-kvlint-routing-key` header), as every part of kvlint reads it.
 *
 * How a refusal reaches the caller: the guarded `fetch` rejects with the {@link GuardError}.
 * The AI SDK retries only its own retryable errors, so the call rejects with the GuardError
 * itself. The `openai` and `@anthropic-ai/sdk` clients retry a failed `fetch` (`maxRetries`,
 * numbered in `x-stainless-retry-count`), then reject with `APIConnectionError` whose `cause`
 * is the GuardError ({@link unwrapGuardError}); a retry of a refused body is refused again
 * without being observed twice, so it is never sent.
 */

import { ConversationError, type Finding, Guard, GuardError, Outcome } from "./sdk";
import * as native from "#native";
import { utf8 } from "./internal/body-text";
import { nativeGuardOf } from "./internal/guard-native";

/** One guard for every session, or a factory called once per session. */
export type GuardLike = Guard | (() => Guard);

/** Both clients number their attempts in this header (openai and @anthropic-ai/sdk's
 * `buildHeaders`): a retry resends a body already observed. */
const RETRY_HEADER = "x-stainless-retry-count";

/** What {@link GuardSessions} keeps: how many of the latest bodies in `observed`, and how
 * many sessions' guards (the least recently used dropped first), so that a long-running
 * service's memory stays bounded. */
export interface GuardSessionsOptions {
  /** Warn (`CacheWarning`) on an unannounced break; `false` keeps the findings without
   * warning (a test's recorder reports them itself). Default `true`. */
  warn?: boolean;
  /** Bodies kept in `observed`, the latest. Default 1,000; `Infinity` keeps them all. */
  keepBodies?: number;
  /** Sessions whose guards are kept. A dropped session's next request starts a new guard,
   * which reads it as a first turn (nothing to compare it with, so nothing is reported).
   * Default 10,000. */
  maxSessions?: number;
}

/** A body observed, with its session key and its guard's outcome. */
export interface ObservedBody {
  key: string;
  body: string;
  outcome: Outcome;
}

/**
 * One {@link Guard} per session: kvlint's multiplexer (the Rust SDK's `GuardSessions`,
 * through the native module), which tells the sessions apart as a recording's are grouped (the
 * session key a body carries, then the conversation it continues: two users of one agent whose
 * bodies carry no id are two sessions), and owns the first-turn reset, the announced breaks,
 * the retry rule and the bounds; this class holds the application's Guard objects.
 */
export class GuardSessions {
  readonly #native: native.NativeGuardSessions;
  readonly #single: Guard | undefined;
  readonly #factory: () => Guard;
  /** The guards of the sessions kept (not with one guard for every session). */
  readonly #guards = new Map<string, Guard>();
  readonly #warn: boolean;

  /** `guard`: one Guard for every request, or a factory (`() => new Guard({mode: "error"})`)
   * called once per session; by default a warn-mode Guard per session. */
  constructor(guard?: GuardLike, options: GuardSessionsOptions = {}) {
    this.#single = guard instanceof Guard ? guard : undefined;
    this.#factory = typeof guard === "function" ? guard : () => new Guard();
    this.#warn = options.warn ?? true;
    const keepBodies = positiveCount(options.keepBodies ?? 1_000, "keepBodies");
    const maxSessions = positiveCount(options.maxSessions ?? 10_000, "maxSessions");
    this.#native = this.#single
      ? native.NativeGuardSessions.single(nativeGuardOf(this.#single), maxSessions, keepBodies)
      : new native.NativeGuardSessions(maxSessions, keepBodies);
  }

  /** The sessions' guards, least recently used first (empty with one guard for every
   * session). */
  get guards(): Map<string, Guard> {
    if (this.#single) {
      return new Map();
    }
    const keys: string[] = JSON.parse(this.#native.keys());
    return new Map(keys.flatMap((key) => {
      const guard = this.#guards.get(key);
      return guard ? [[key, guard] as const] : [];
    }));
  }

  /** The latest bodies observed (`keepBodies` of them), with their session key and outcome,
   * in order; each body's JSON text as the engine read it (the text sent, for a body
   * `JSON.stringify` wrote). */
  get observed(): ObservedBody[] {
    const observed: { key: string; body: string; findings: Finding[] }[] = JSON.parse(this.#native.observed());
    return observed.map(({ key, body, findings }) => ({ key, body, outcome: new Outcome(findings) }));
  }

  guardFor(key: string): Guard {
    if (this.#single) {
      return this.#single;
    }
    this.#answer<null>(() => this.#native.guardFor(key));
    // Kept: the native sessions ask for a guard before they keep a session.
    return this.#guards.get(key) as Guard;
  }

  /** The bodies of one session kept in `observed`, parsed, in the order they were sent (for
   * {@link check}). */
  bodies(key = ""): Record<string, unknown>[] {
    return this.observed.filter((entry) => entry.key === key).map((entry) => JSON.parse(entry.body));
  }

  /**
   * Observes one body's JSON text, as it goes on the wire, with its session's guard. An
   * unannounced break warns (`CacheWarning`) in warn mode; error mode throws
   * {@link GuardError}. `retry`: the client's attempt number; a retry is not observed again.
   * `sentFrom`: an error made where the application sent the request, whose frame the warning
   * names and whose stack it carries (by default, this call's).
   */
  observe(body: string, headers: [string, string][] = [], retry = 0, sentFrom?: Error): Outcome | undefined {
    const observed = this.#answer<{ key: string; findings: Finding[]; warn: boolean } | null>(() =>
      this.#native.observe(utf8(body), JSON.stringify(headers), retry),
    );
    if (!observed) {
      return undefined; // not a JSON prompt, or a retry of a body already observed
    }
    const outcome = new Outcome(observed.findings);
    if (this.#warn && observed.warn) {
      emitCacheWarning(formatFindings(outcome.errors()), sentFrom ?? new Error());
    }
    return outcome;
  }

  /** Shows the guard of the session `body` belongs to the API's answer to it (its JSON
   * text): the cache usage it reports is summed in that guard's `reportedUsage`. False when
   * the session is not kept or nothing was reported. */
  observeResponse(body: string, response: string, headers: [string, string][] = []): boolean {
    // `utf8` answers a view of one shared buffer: the body is copied out before the response
    // is encoded.
    const sent = utf8(body).slice();
    return this.#native.observeResponse(sent, JSON.stringify(headers), utf8(response));
  }

  /** A native call's value: a new session's guard made and handed over first (the call is
   * made again), the dropped sessions' guards forgotten, an error thrown as its class. */
  #answer<T>(call: () => string): T {
    for (;;) {
      const answer: NativeAnswer<T> = JSON.parse(call());
      for (const key of JSON.parse(this.#native.takeDropped()) as string[]) {
        this.#guards.delete(key);
      }
      const error = answer.error;
      if (!error) {
        return answer.value;
      }
      if (error.kind !== "NeedsGuard") {
        switch (error.kind) {
          case "GuardError":
            throw new GuardError(error.message, error.findings ?? []);
          case "TypeError":
            throw new TypeError(error.message);
          default:
            throw new ConversationError(error.message);
        }
      }
      const guard = this.#factory();
      this.#native.adopt(nativeGuardOf(guard));
      this.#guards.set(error.message, guard);
    }
  }
}

/** What the native multiplexer answers: its value, or an error of the kind it names. */
interface NativeAnswer<T> {
  value: T;
  error?: { kind: string; message: string; findings?: Finding[] };
}

function positiveCount(value: number, name: string): number {
  if (!(Number.isInteger(value) || value === Infinity) || value < 1) {
    throw new RangeError(`GuardSessions: ${name} must be a positive integer or Infinity, not ${value}`);
  }
  return value;
}

/** This package's own files, whose frames a warning passes over to name the application's. */
const OWN_FILES = typeof __dirname === "string" ? __dirname : undefined;

/**
 * Emits a `CacheWarning` that says where the application sent the request, as a thrown
 * {@link GuardError} does in error mode: the first frame of `sentFrom` outside this package,
 * Node's internals and `node_modules` (the HTTP client) ends the message, and the warning
 * carries `sentFrom`'s stack (`--trace-warnings`, a `warning` listener).
 */
function emitCacheWarning(message: string, sentFrom: Error): void {
  const frames = (sentFrom.stack ?? "").split("\n").slice(1);
  const caller = frames.find(
    (frame) =>
      !(OWN_FILES && frame.includes(OWN_FILES)) && !frame.includes("node:internal") && !frame.includes("node_modules"),
  );
  const warning = new Error(caller ? `${message}\n  sent ${caller.trim()}` : message);
  warning.name = "CacheWarning";
  Object.assign(warning, { code: "KVLINT_CACHE" });
  warning.stack = [`CacheWarning: ${warning.message}`, ...frames].join("\n");
  process.emitWarning(warning);
}

/** `rule (turn N, part): message`, a finding a line. */
export function formatFindings(findings: Finding[]): string {
  return findings
    .map((finding) => `${finding.rule} (turn ${finding.turn}${finding.part ? `, ${finding.part}` : ""}): ${finding.message}`)
    .join("\n");
}

/** A `fetch` with its sessions, at `kvlintGuard`. */
export type GuardedFetch = typeof fetch & { kvlintGuard: GuardSessions };

/**
 * A `fetch` that guards every prompt request before sending it with `options.fetch` (by
 * default the global one), and shows the session's guard the API's JSON answer (its cache
 * usage: the guard's `reportedUsage` and `otelAttributes()`; a streamed answer is not read).
 * `guard`: a Guard, a factory of guards (one per session), or the sessions themselves; by
 * default a warn-mode Guard per session.
 */
export function guardFetch(guard?: GuardLike | GuardSessions, options: { fetch?: typeof fetch } = {}): GuardedFetch {
  const sessions = guard instanceof GuardSessions ? guard : new GuardSessions(guard);
  const send = options.fetch ?? globalThis.fetch;
  const guarded = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // Made before the first await, while the application's call is still on the stack.
    const sentFrom = new Error();
    const sent = await promptRequest(input, init);
    if (sent) {
      sessions.observe(sent.body, sent.headers, sent.retry, sentFrom);
    }
    const response = await send(input, init);
    if (sent && (response.headers.get("content-type") ?? "").includes("json")) {
      // A copy is read: the application reads the response as it was.
      const answer = await response.clone().text().catch(() => undefined);
      if (answer) {
        sessions.observeResponse(sent.body, answer, sent.headers);
      }
    }
    return response;
  };
  return Object.assign(guarded, { kvlintGuard: sessions }) as GuardedFetch;
}

/** The body text, headers and attempt of a prompt request, else undefined. */
async function promptRequest(
  input: string | URL | Request,
  init: RequestInit | undefined,
): Promise<{ body: string; headers: [string, string][]; retry: number } | undefined> {
  const request = input instanceof Request ? input : undefined;
  const method = (init?.method ?? request?.method ?? "GET").toUpperCase();
  const url = request ? request.url : String(input);
  if (method !== "POST" || !native.isPromptPath(url)) {
    return undefined;
  }
  const headers = new Headers(init?.headers ?? request?.headers);
  let body: string | undefined;
  const given = init?.body;
  if (typeof given === "string") {
    body = given;
  } else if (given instanceof Uint8Array || given instanceof ArrayBuffer) {
    body = new TextDecoder().decode(given);
  } else if (given === undefined && request) {
    body = await request.clone().text();
  }
  if (!body) {
    return undefined; // a stream or a form: not a JSON prompt
  }
  return { body, headers: [...headers.entries()], retry: Number(headers.get(RETRY_HEADER) ?? 0) || 0 };
}

/** The {@link GuardError} behind a client's `APIConnectionError`, following `cause`; the error
 * itself when there is none. */
export function unwrapGuardError(error: unknown): unknown {
  const seen = new Set<unknown>();
  let current = error;
  while (current instanceof Error && !seen.has(current)) {
    if (current instanceof GuardError) {
      return current;
    }
    seen.add(current);
    current = current.cause;
  }
  return error;
}
