/**
 * kvlint-cache for Node: assemble agent prompts that keep their cached prefix, and guard the
 * requests an agent sends. The engine is kvlint's Rust code (the `kvlint-sdk` crate), compiled
 * in through Node-API; this layer only turns JavaScript values into JSON text for it and its
 * answers back into objects, warnings and typed errors.
 *
 * - {@link Conversation}: one agent session in stability tiers (static blocks, session blocks,
 *   tools, turn context last) with an append-only history, rendered as an OpenAI Chat,
 *   OpenAI Responses or Anthropic Messages body.
 * - {@link Guard}: `kvlint check` on each pair of turns, as the requests are sent.
 * - {@link check}: the findings of one recorded session.
 *
 * Mistakes are reported at the call that made them: an input the provider would reject (or a
 * change a strict conversation refuses) throws {@link ConversationError}; a deferred change or
 * a volatile value in a cached tier is a `CacheWarning` (`process.emitWarning`); a value JSON
 * cannot carry throws {@link JSONValueError} naming where it is.
 */

import * as native from "#native";
import { BodyText, utf8 } from "./internal/body-text";
import { registerGuard } from "./internal/guard-native";

/** A finding of kvlint's rules, at the turn that broke the cache. */
export interface Finding {
  rule: string;
  code: string;
  severity: "error" | "warning" | "info";
  message: string;
  help: string;
  /** The turn (0-based) whose request recomputes cached tokens. */
  turn: number;
  tokensLost: number;
  /** Where in the request the break starts (`messages[3].content`), when known. */
  part: string | null;
}

/** A value in a cached tier that changes from request to request. */
export interface VolatileValue {
  tier: string;
  class: string;
  value: string;
  rule: string;
  code: string;
}

/** What an `add*` call did. */
export interface TierChange {
  /** In the prompt from the next body on. */
  applied: boolean;
  /** Waiting for the next compaction: the prefix is committed. */
  deferred: boolean;
  /** Blocks of the current prefix the deferred change recomputes when applied. */
  costBlocks: number;
  volatile: VolatileValue[];
}

/** What a compaction cost: the only way history loses messages. */
export interface CacheBreak {
  droppedMessages: number;
  keptMessages: number;
  /** Kept beyond `keepLast`: no user message followed the cut. */
  keptBeyondAsked: number;
  reusedBlocks: number;
  lostBlocks: number;
  appliedChanges: unknown[];
}

/** A tool call the assistant made: arguments as the model's JSON text (kept byte for byte) or
 * as an object; the Chat Completions shape `{id, function: {name, arguments}}` too. */
export type ToolCallInput =
  | { id: string; name: string; arguments?: string | Record<string, unknown> }
  | { id: string; function: { name: string; arguments?: string | Record<string, unknown> } };

/** A message's content: its text, or content blocks in any of the three APIs' shapes. */
export type Content = string | Record<string, unknown>[];

/** JSON data: what a request body, a response or a tool definition is. */
export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };

/** An input the provider would reject, or a change a strict conversation refuses. */
export class ConversationError extends Error {
  override name = "ConversationError";
}

/** A guard in error mode refusing a request that recomputes cached content. */
export class GuardError extends Error {
  override name = "GuardError";
  /** The refused turn's findings. */
  readonly findings: Finding[];

  constructor(message: string, findings: Finding[]) {
    super(message);
    this.findings = findings;
  }
}

/** A value JSON cannot carry (a `BigInt`, a cycle, a function, a symbol, `undefined` in an
 * array, a number that is not finite), found before anything is sent. */
export class JSONValueError extends TypeError {
  override name = "JSONValueError";
  /** Where the value is: `body.messages[2].content`. */
  readonly path: string;

  constructor(path: string, what: string) {
    super(`${path}: ${what} cannot be sent as JSON`);
    this.path = path;
  }
}

/** The findings of a session ({@link check}) or of one turn ({@link Guard.observe}). */
export class Outcome {
  readonly findings: Finding[];

  constructor(findings: Finding[]) {
    this.findings = findings;
  }

  /** No error and no warning (infos are costs by design). */
  isClean(): boolean {
    return this.findings.every((finding) => finding.severity === "info");
  }

  errors(): Finding[] {
    return this.findings.filter((finding) => finding.severity === "error");
  }

  warnings(): Finding[] {
    return this.findings.filter((finding) => finding.severity === "warning");
  }

  /** The previous turn's per-turn tail, dropped by design: info findings with their tokens. */
  costs(): Finding[] {
    return this.findings.filter((finding) => finding.severity === "info");
  }

  get tokensLost(): number {
    return this.findings.reduce((sum, finding) => sum + finding.tokensLost, 0);
  }

  [Symbol.iterator](): Iterator<Finding> {
    return this.findings[Symbol.iterator]();
  }
}

/** The result of {@link check}: the session's findings and token counts. */
export class Report extends Outcome {
  readonly promptTokens: number;
  readonly reusedTokens: number;

  constructor(findings: Finding[], promptTokens: number, reusedTokens: number) {
    super(findings);
    this.promptTokens = promptTokens;
    this.reusedTokens = reusedTokens;
  }
}

/** The JSON text of `value`, as `JSON.stringify` writes it (key order kept), after refusing
 * what JSON cannot carry, at its path. */
export function toJSONText(value: unknown, name: string): string {
  return serializeAt(value, [name], []);
}

/** {@link toJSONText} of a value inside another: `trail` names its place, `ancestors` the values
 * that enclose it (a reference back to one is a cycle). */
function serializeAt(value: unknown, trail: (string | number)[], ancestors: object[]): string {
  refuseNonJSON(value, trail, new Set(ancestors));
  return JSON.stringify(value);
}

/** The path of a value from its trail of keys: the name, then `.key`, `["odd key"]`, `[3]`. */
function pathOf(trail: (string | number)[]): string {
  const [name, ...keys] = trail;
  return keys.reduce<string>(
    (path, key) =>
      typeof key === "number"
        ? `${path}[${key}]`
        : /^[A-Za-z_$][\w$]*$/.test(key)
          ? `${path}.${key}`
          : `${path}[${JSON.stringify(key)}]`,
    String(name),
  );
}

/** Walks `value` as JSON.stringify will; `trail` holds the keys down to it, made into a path
 * only for an error, so that a large body's walk allocates nothing per value. */
function refuseNonJSON(value: unknown, trail: (string | number)[], open: Set<object>): void {
  switch (typeof value) {
    case "bigint":
      throw new JSONValueError(pathOf(trail), "a BigInt");
    case "function":
      throw new JSONValueError(pathOf(trail), "a function");
    case "symbol":
      throw new JSONValueError(pathOf(trail), "a symbol");
    case "undefined":
      throw new JSONValueError(pathOf(trail), "undefined");
    case "number":
      if (!Number.isFinite(value)) {
        throw new JSONValueError(pathOf(trail), String(value));
      }
      return;
    case "object":
      break;
    default:
      return;
  }
  if (value === null) {
    return;
  }
  if (value instanceof Map || value instanceof Set) {
    // JSON.stringify writes either as `{}`.
    throw new JSONValueError(pathOf(trail), `a ${value instanceof Map ? "Map" : "Set"}`);
  }
  const object = value as Record<string, unknown>;
  if (typeof object.toJSON === "function") {
    // A Date, or a class that says how it is sent: JSON.stringify calls it.
    refuseNonJSON(object.toJSON(), trail, open);
    return;
  }
  if (open.has(object)) {
    throw new JSONValueError(pathOf(trail), "a cycle back to an enclosing value");
  }
  open.add(object);
  if (Array.isArray(object)) {
    for (let index = 0; index < object.length; index += 1) {
      trail.push(index);
      refuseNonJSON(object[index], trail, open);
      trail.pop();
    }
  } else {
    for (const key in object) {
      if (!Object.hasOwn(object, key)) {
        continue;
      }
      const item = object[key];
      // JSON.stringify leaves out an object's undefined, function and symbol values: the body
      // sent has no such key, as the caller meant.
      if (item === undefined || typeof item === "function" || typeof item === "symbol") {
        continue;
      }
      trail.push(key);
      refuseNonJSON(item, trail, open);
      trail.pop();
    }
  }
  open.delete(object);
}

interface Answer<T> {
  value: T;
  warnings?: string[];
  error?: { kind: string; message: string; findings?: Finding[] };
}

/** The `max_tokens` an Anthropic body gets when none is asked for. */
const ANTHROPIC_DEFAULT_MAX_TOKENS = native.anthropicDefaultMaxTokens();

/** The native call's answer: its value, after its warnings are issued at the caller's line;
 * or its error, thrown as its class. */
function answered<T>(text: string): T {
  const answer = JSON.parse(text) as Answer<T>;
  if (answer.error) {
    const { kind, message, findings } = answer.error;
    switch (kind) {
      case "GuardError":
        throw new GuardError(message, findings ?? []);
      case "TypeError":
        throw new TypeError(message);
      default:
        throw new ConversationError(message);
    }
  }
  for (const warning of answer.warnings ?? []) {
    process.emitWarning(warning, { type: "CacheWarning", code: "KVLINT_CACHE" });
  }
  return answer.value;
}

/** `{dropped_messages: 1}` as `{droppedMessages: 1}`, for the engine's own records. */
function camelCased<T>(record: Record<string, unknown>): T {
  return Object.fromEntries(
    Object.entries(record).map(([key, value]) => [key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()), value]),
  ) as T;
}

/** The content as the native layer takes it: a string, or an array of blocks. */
function contentText(content: Content, name: string): string {
  if (typeof content !== "string" && !Array.isArray(content)) {
    throw new ConversationError(`${name}: expected a string or an array of content blocks`);
  }
  return toJSONText(content, name);
}

/** One agent session in stability tiers, with an append-only history. */
export class Conversation {
  #native: native.NativeConversation;

  /** `strict`: a change to a committed tier throws instead of waiting for compaction. */
  constructor(options: { strict?: boolean } = {}) {
    this.#native = new native.NativeConversation(options.strict ?? false);
  }

  get isStrict(): boolean {
    return this.#native.isStrict;
  }

  /** A block of the static tier (instructions shared by every session). */
  addStatic(text: string): TierChange {
    return answered(this.#native.addStatic(text));
  }

  /** A block of the session tier, by key (a project's rules, a user's profile). */
  addSession(key: string, text: string): TierChange {
    return answered(this.#native.addSession(key, text));
  }

  /** A tool, in any API's definition shape; tools are sent in canonical order. */
  addTool(definition: Record<string, unknown>): TierChange {
    return answered(this.#native.addTool(toJSONText(definition, "definition")));
  }

  /** What changes every turn (the time, the open file): sent last, after the history. */
  addTurnContext(text: string): void {
    this.#native.addTurnContext(text);
  }

  clearTurnContext(): void {
    this.#native.clearTurnContext();
  }

  pushUser(content: Content): void {
    answered(this.#native.pushUser(contentText(content, "content")));
  }

  pushAssistant(text = "", toolCalls?: ToolCallInput[], options: { thinking?: Record<string, unknown>[] } = {}): void {
    const calls = toolCalls === undefined ? "null" : toJSONText(toolCalls, "toolCalls");
    const thinking = options.thinking === undefined ? "null" : toJSONText(options.thinking, "thinking");
    answered(this.#native.pushAssistant(text, calls, thinking));
  }

  pushToolResult(callId: string, content: Content): void {
    answered(this.#native.pushToolResult(callId, contentText(content, "content")));
  }

  /** The answer of a Chat Completions response (its first choice's message). */
  pushOpenAIResponse(response: object): void {
    answered(this.#native.pushOpenAIResponse(toJSONText(response, "response")));
  }

  /** The output items of a Responses API response. */
  pushResponsesOutput(response: object): void {
    answered(this.#native.pushResponsesOutput(toJSONText(response, "response")));
  }

  /** The content of an Anthropic Messages response. */
  pushAnthropicResponse(response: object): void {
    answered(this.#native.pushAnthropicResponse(toJSONText(response, "response")));
  }

  /** The conversation a request body holds, in any of the three APIs' shapes. */
  static fromBody(body: object): Conversation {
    const conversation = new Conversation();
    answered(conversation.#native.loadBody(toJSONText(body, "body")));
    return conversation;
  }

  toOpenAIChat(model: string): Record<string, JSONValue> {
    return JSON.parse(this.#native.toOpenAIChat(model));
  }

  toOpenAIResponses(model: string): Record<string, JSONValue> {
    return JSON.parse(this.#native.toOpenAIResponses(model));
  }

  toAnthropic(model: string, options: { maxTokens?: number } = {}): Record<string, JSONValue> {
    const maxTokens = options.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS;
    if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > 0xffff_ffff) {
      throw new ConversationError(`maxTokens: expected a positive integer, got ${maxTokens}`);
    }
    return JSON.parse(this.#native.toAnthropic(model, maxTokens));
  }

  /** A copy to render from without committing this conversation's prefix. */
  preview(): Conversation {
    const copy = new Conversation();
    copy.#native = this.#native.preview();
    return copy;
  }

  /** Drops history but the last `keepLast` messages (and a summary before them): the one
   * break, explicit, with its cost. */
  compact(keepLast: number, options: { summary?: string } = {}): CacheBreak {
    return camelCased(answered(this.#native.compact(count(keepLast, "keepLast"), options.summary ?? null)));
  }

  /** Compacts down to `keepMessages` when history passes `maxMessages`. */
  enforceWindow(maxMessages: number, keepMessages: number): CacheBreak | null {
    const cacheBreak = answered<Record<string, unknown> | null>(
      this.#native.enforceWindow(count(maxMessages, "maxMessages"), count(keepMessages, "keepMessages")),
    );
    return cacheBreak === null ? null : camelCased(cacheBreak);
  }

  /** The key a router keeps this session's requests together by. */
  get routingKey(): string {
    return this.#native.routingKey;
  }

  routingHeaders(): Record<string, string> {
    return JSON.parse(this.#native.routingHeaders());
  }

  get isCommitted(): boolean {
    return this.#native.isCommitted;
  }

  get history(): Record<string, JSONValue>[] {
    return JSON.parse(this.#native.history());
  }

  get pendingChanges(): Record<string, JSONValue>[] {
    return JSON.parse(this.#native.pendingChanges());
  }

  /** The conversation saved, to {@link Conversation.fromJSON} in this process or another:
   * `JSON.stringify(conversation)` gives the same text. */
  toJSON(): Record<string, JSONValue> {
    return JSON.parse(this.#native.save());
  }

  /** A conversation {@link Conversation.toJSON} saved, as text or as the parsed object. */
  static fromJSON(saved: string | Record<string, unknown>): Conversation {
    const conversation = new Conversation();
    const text = typeof saved === "string" ? saved : toJSONText(saved, "saved");
    answered(conversation.#native.restore(text));
    return conversation;
  }
}

function count(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw new ConversationError(`${name}: expected a count, got ${value}`);
  }
  return value;
}

/** `kvlint check` on each pair of turns of one session, as the requests are sent. */
export class Guard {
  #native: native.NativeGuard;
  /** The bodies' JSON text: what a body sends again is not serialized again. */
  #bodyText = new BodyText(serializeAt);
  readonly mode: "warn" | "error";

  /** `mode: "error"` refuses a request that recomputes cached content ({@link GuardError});
   * `"warn"` (the default) reports it in the outcome. */
  constructor(options: { mode?: "warn" | "error" } = {}) {
    const mode = options.mode ?? "warn";
    if (mode !== "warn" && mode !== "error") {
      throw new ConversationError(`mode: expected "warn" or "error", got ${JSON.stringify(mode)}`);
    }
    this.mode = mode;
    this.#native = new native.NativeGuard(mode === "error");
    registerGuard(this, this.#native);
  }

  /** The next request body of the session, as it is sent. */
  observe(body: object): Outcome {
    return new Outcome(answered(this.#native.observe(this.#bodyText.utf8(body, "body"))));
  }

  /** A body's JSON text, exactly as it goes on the wire (a `fetch` guard's). */
  observeText(body: string): Outcome {
    return new Outcome(answered(this.#native.observe(utf8(body))));
  }

  /** Every finding so far, in order (refused turns included). */
  get findings(): Finding[] {
    return JSON.parse(this.#native.findings());
  }

  /** The next turn breaks the prefix on purpose (a compaction): counted, not reported. */
  expectBreak(): void {
    this.#native.expectBreak();
  }

  get isBreakExpected(): boolean {
    return this.#native.isBreakExpected;
  }

  /** Forgets the session: the next body is a first turn. */
  reset(): void {
    this.#native.reset();
  }

  get counters(): Record<string, unknown> {
    return camelCased(JSON.parse(this.#native.counters()));
  }

  /** Shows the guard the API's answer to the last request (parsed, or its JSON text): the
   * cache usage it reports is summed in {@link Guard.reportedUsage}. False when it reports
   * none. A `guardFetch` shows it every JSON answer. */
  observeResponse(response: object | string): boolean {
    return this.#native.observeResponse(utf8(typeof response === "string" ? response : JSON.stringify(response)));
  }

  /** The cache usage the API reported for the answers shown, summed: `responses`,
   * `inputTokens` (cached ones included), `cacheReadInputTokens`, `cacheCreationInputTokens`. */
  get reportedUsage(): ReportedUsage {
    const { otel: _otel, ...usage } = JSON.parse(this.#native.reportedUsage());
    return camelCased(usage) as unknown as ReportedUsage;
  }

  /** The same under OpenTelemetry's GenAI attribute names (`gen_ai.usage.input_tokens`,
   * `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`), to
   * set on a span or export as counters. */
  otelAttributes(): Record<string, number> {
    return JSON.parse(this.#native.reportedUsage()).otel;
  }
}

/** The cache usage an API reported, summed over the answers shown to a {@link Guard}. */
export interface ReportedUsage {
  responses: number;
  inputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
}

/** Checks one session, the request bodies an agent sent, in order, in provider mode (the
 * order hosted APIs cache in, tokenized with `o200k_base`). */
export function check(bodies: object[]): Report {
  if (!Array.isArray(bodies)) {
    throw new ConversationError("bodies: expected an array of request bodies");
  }
  const report = answered<{ findings: Finding[]; promptTokens: number; reusedTokens: number }>(
    native.check(toJSONText(bodies, "bodies")),
  );
  return new Report(report.findings, report.promptTokens, report.reusedTokens);
}

/** Which session a body's JSON text (as sent) belongs to, and whether it opens a conversation;
 * `undefined` when the text is not a JSON object (not a prompt). Read once, in the engine. */
export function sessionOfText(body: string, headers: [string, string][] = []): { key: string; opens: boolean } | undefined {
  try {
    return answered(native.sessionOf(body, JSON.stringify(headers)));
  } catch (error) {
    if (error instanceof TypeError) {
      return undefined;
    }
    throw error;
  }
}

/** The session a request belongs to, from its body and headers: `""` when it carries none. */
export function sessionKey(body: object, headers: [string, string][] = []): string {
  return answered<{ key: string }>(native.sessionOf(toJSONText(body, "body"), toJSONText(headers, "headers"))).key;
}

/** Whether a body opens a conversation: one user message and no answer yet. */
export function opensConversation(body: object): boolean {
  return answered<{ opens: boolean }>(native.sessionOf(toJSONText(body, "body"), "[]")).opens;
}

/** The header a self-hosted router reads a session's routing key from. */
export const ROUTING_KEY_HEADER: string = native.routingKeyHeader();
