// dist/ai.d.ts
/**
 * The AI SDK (`ai`): a language-model middleware for `wrapLanguageModel` that observes the body
 * each call sent, as the provider reports it (`request.body` of `doGenerate` and `doStream`,
 * which the providers send as its `JSON.stringify`).
 *
 * It sees the body only once the provider has sent it: a break is reported (warn mode) or
 * thrown as {@link GuardError} (error mode) when the call returns, after the request was paid
 * for. To refuse a body before it is sent, give the provider {@link guardFetch} as its `fetch`
 * (`createOpenAI({fetch})`, `createAnthropic({fetch})`); use the middleware where the model
 * comes ready-made and no `fetch` can be given.
 */
import { type GuardLike, GuardSessions } from "./fetch";
/** What the middleware reads of a call's result. */
interface SentRequest {
    request?: {
        body?: unknown;
    };
}
/** A `LanguageModelMiddleware` of the AI SDK (its `v4` specification), with its sessions. */
export interface KvlintMiddleware {
    readonly specificationVersion: "v4";
    wrapGenerate<Result extends SentRequest>(options: {
        doGenerate: () => PromiseLike<Result>;
    }): Promise<Result>;
    wrapStream<Result extends SentRequest>(options: {
        doStream: () => PromiseLike<Result>;
    }): Promise<Result>;
    readonly kvlintGuard: GuardSessions;
}
/** A middleware for `wrapLanguageModel({model, middleware})`. `guard`: as {@link guardFetch}
 * takes it. */
export declare function kvlintMiddleware(guard?: GuardLike | GuardSessions): KvlintMiddleware;
export {};
// dist/fetch.d.ts
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
import { type Finding, Guard, Outcome } from "./sdk";
/** One guard for every session, or a factory called once per session. */
export type GuardLike = Guard | (() => Guard);
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
export declare class GuardSessions {
    #private;
    /** `guard`: one Guard for every request, or a factory (`() => new Guard({mode: "error"})`)
     * called once per session; by default a warn-mode Guard per session. */
    constructor(guard?: GuardLike, options?: GuardSessionsOptions);
    /** The sessions' guards, least recently used first (empty with one guard for every
     * session). */
    get guards(): Map<string, Guard>;
    /** The latest bodies observed (`keepBodies` of them), with their session key and outcome,
     * in order; each body's JSON text as the engine read it (the text sent, for a body
     * `JSON.stringify` wrote). */
    get observed(): ObservedBody[];
    guardFor(key: string): Guard;
    /** The bodies of one session kept in `observed`, parsed, in the order they were sent (for
     * {@link check}). */
    bodies(key?: string): Record<string, unknown>[];
    /**
     * Observes one body's JSON text, as it goes on the wire, with its session's guard. An
     * unannounced break warns (`CacheWarning`) in warn mode; error mode throws
     * {@link GuardError}. `retry`: the client's attempt number; a retry is not observed again.
     * `sentFrom`: an error made where the application sent the request, whose frame the warning
     * names and whose stack it carries (by default, this call's).
     */
    observe(body: string, headers?: [string, string][], retry?: number, sentFrom?: Error): Outcome | undefined;
    /** Shows the guard of the session `body` belongs to the API's answer to it (its JSON
     * text): the cache usage it reports is summed in that guard's `reportedUsage`. False when
     * the session is not kept or nothing was reported. */
    observeResponse(body: string, response: string, headers?: [string, string][]): boolean;
}
/** `rule (turn N, part): message`, a finding a line. */
export declare function formatFindings(findings: Finding[]): string;
/** A `fetch` with its sessions, at `kvlintGuard`. */
export type GuardedFetch = typeof fetch & {
    kvlintGuard: GuardSessions;
};
/**
 * A `fetch` that guards every prompt request before sending it with `options.fetch` (by
 * default the global one), and shows the session's guard the API's JSON answer (its cache
 * usage: the guard's `reportedUsage` and `otelAttributes()`; a streamed answer is not read).
 * `guard`: a Guard, a factory of guards (one per session), or the sessions themselves; by
 * default a warn-mode Guard per session.
 */
export declare function guardFetch(guard?: GuardLike | GuardSessions, options?: {
    fetch?: typeof fetch;
}): GuardedFetch;
/** The {@link GuardError} behind a client's `APIConnectionError`, following `cause`; the error
 * itself when there is none. */
export declare function unwrapGuardError(error: unknown): unknown;
// dist/index.d.ts
/**
 * kvlint-cache for Node: assemble agent prompts that keep their cached prefix, and guard the
 * requests an agent sends, on kvlint's Rust engine.
 *
 * - `sdk`: {@link Conversation}, {@link Guard}, {@link check} and the errors.
 * - `fetch`: {@link guardFetch}, the guard on the wire for every client that takes a `fetch`.
 * - `ai`: {@link kvlintMiddleware}, for the AI SDK's `wrapLanguageModel`.
 * - `testing`: {@link recordPrompts}, {@link assertPrefixStable} and vitest's
 *   {@link kvlintMatchers}.
 */
export * from "./sdk";
export * from "./fetch";
export * from "./ai";
export * from "./testing";
// dist/sdk.d.ts
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
export type ToolCallInput = {
    id: string;
    name: string;
    arguments?: string | Record<string, unknown>;
} | {
    id: string;
    function: {
        name: string;
        arguments?: string | Record<string, unknown>;
    };
};
/** A message's content: its text, or content blocks in any of the three APIs' shapes. */
export type Content = string | Record<string, unknown>[];
/** JSON data: what a request body, a response or a tool definition is. */
export type JSONValue = string | number | boolean | null | JSONValue[] | {
    [key: string]: JSONValue;
};
/** An input the provider would reject, or a change a strict conversation refuses. */
export declare class ConversationError extends Error {
    name: string;
}
/** A guard in error mode refusing a request that recomputes cached content. */
export declare class GuardError extends Error {
    name: string;
    /** The refused turn's findings. */
    readonly findings: Finding[];
    constructor(message: string, findings: Finding[]);
}
/** A value JSON cannot carry (a `BigInt`, a cycle, a function, a symbol, `undefined` in an
 * array, a number that is not finite), found before anything is sent. */
export declare class JSONValueError extends TypeError {
    name: string;
    /** Where the value is: `body.messages[2].content`. */
    readonly path: string;
    constructor(path: string, what: string);
}
/** The findings of a session ({@link check}) or of one turn ({@link Guard.observe}). */
export declare class Outcome {
    readonly findings: Finding[];
    constructor(findings: Finding[]);
    /** No error and no warning (infos are costs by design). */
    isClean(): boolean;
    errors(): Finding[];
    warnings(): Finding[];
    /** The previous turn's per-turn tail, dropped by design: info findings with their tokens. */
    costs(): Finding[];
    get tokensLost(): number;
    [Symbol.iterator](): Iterator<Finding>;
}
/** The result of {@link check}: the session's findings and token counts. */
export declare class Report extends Outcome {
    readonly promptTokens: number;
    readonly reusedTokens: number;
    constructor(findings: Finding[], promptTokens: number, reusedTokens: number);
}
/** The JSON text of `value`, as `JSON.stringify` writes it (key order kept), after refusing
 * what JSON cannot carry, at its path. */
export declare function toJSONText(value: unknown, name: string): string;
/** One agent session in stability tiers, with an append-only history. */
export declare class Conversation {
    #private;
    /** `strict`: a change to a committed tier throws instead of waiting for compaction. */
    constructor(options?: {
        strict?: boolean;
    });
    get isStrict(): boolean;
    /** A block of the static tier (instructions shared by every session). */
    addStatic(text: string): TierChange;
    /** A block of the session tier, by key (a project's rules, a user's profile). */
    addSession(key: string, text: string): TierChange;
    /** A tool, in any API's definition shape; tools are sent in canonical order. */
    addTool(definition: Record<string, unknown>): TierChange;
    /** What changes every turn (the time, the open file): sent last, after the history. */
    addTurnContext(text: string): void;
    clearTurnContext(): void;
    pushUser(content: Content): void;
    pushAssistant(text?: string, toolCalls?: ToolCallInput[], options?: {
        thinking?: Record<string, unknown>[];
    }): void;
    pushToolResult(callId: string, content: Content): void;
    /** The answer of a Chat Completions response (its first choice's message). */
    pushOpenAIResponse(response: object): void;
    /** The output items of a Responses API response. */
    pushResponsesOutput(response: object): void;
    /** The content of an Anthropic Messages response. */
    pushAnthropicResponse(response: object): void;
    /** The conversation a request body holds, in any of the three APIs' shapes. */
    static fromBody(body: object): Conversation;
    toOpenAIChat(model: string): Record<string, JSONValue>;
    toOpenAIResponses(model: string): Record<string, JSONValue>;
    toAnthropic(model: string, options?: {
        maxTokens?: number;
    }): Record<string, JSONValue>;
    /** A copy to render from without committing this conversation's prefix. */
    preview(): Conversation;
    /** Drops history but the last `keepLast` messages (and a summary before them): the one
     * break, explicit, with its cost. */
    compact(keepLast: number, options?: {
        summary?: string;
    }): CacheBreak;
    /** Compacts down to `keepMessages` when history passes `maxMessages`. */
    enforceWindow(maxMessages: number, keepMessages: number): CacheBreak | null;
    /** The key a router keeps this session's requests together by. */
    get routingKey(): string;
    routingHeaders(): Record<string, string>;
    get isCommitted(): boolean;
    get history(): Record<string, JSONValue>[];
    get pendingChanges(): Record<string, JSONValue>[];
    /** The conversation saved, to {@link Conversation.fromJSON} in this process or another:
     * `JSON.stringify(conversation)` gives the same text. */
    toJSON(): Record<string, JSONValue>;
    /** A conversation {@link Conversation.toJSON} saved, as text or as the parsed object. */
    static fromJSON(saved: string | Record<string, unknown>): Conversation;
}
/** `kvlint check` on each pair of turns of one session, as the requests are sent. */
export declare class Guard {
    #private;
    readonly mode: "warn" | "error";
    /** `mode: "error"` refuses a request that recomputes cached content ({@link GuardError});
     * `"warn"` (the default) reports it in the outcome. */
    constructor(options?: {
        mode?: "warn" | "error";
    });
    /** The next request body of the session, as it is sent. */
    observe(body: object): Outcome;
    /** A body's JSON text, exactly as it goes on the wire (a `fetch` guard's). */
    observeText(body: string): Outcome;
    /** Every finding so far, in order (refused turns included). */
    get findings(): Finding[];
    /** The next turn breaks the prefix on purpose (a compaction): counted, not reported. */
    expectBreak(): void;
    get isBreakExpected(): boolean;
    /** Forgets the session: the next body is a first turn. */
    reset(): void;
    get counters(): Record<string, unknown>;
    /** Shows the guard the API's answer to the last request (parsed, or its JSON text): the
     * cache usage it reports is summed in {@link Guard.reportedUsage}. False when it reports
     * none. A `guardFetch` shows it every JSON answer. */
    observeResponse(response: object | string): boolean;
    /** The cache usage the API reported for the answers shown, summed: `responses`,
     * `inputTokens` (cached ones included), `cacheReadInputTokens`, `cacheCreationInputTokens`. */
    get reportedUsage(): ReportedUsage;
    /** The same under OpenTelemetry's GenAI attribute names (`gen_ai.usage.input_tokens`,
     * `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`), to
     * set on a span or export as counters. */
    otelAttributes(): Record<string, number>;
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
export declare function check(bodies: object[]): Report;
/** Which session a body's JSON text (as sent) belongs to, and whether it opens a conversation;
 * `undefined` when the text is not a JSON object (not a prompt). Read once, in the engine. */
export declare function sessionOfText(body: string, headers?: [string, string][]): {
    key: string;
    opens: boolean;
} | undefined;
/** The session a request belongs to, from its body and headers: `""` when it carries none. */
export declare function sessionKey(body: object, headers?: [string, string][]): string;
/** Whether a body opens a conversation: one user message and no answer yet. */
export declare function opensConversation(body: object): boolean;
/** The header a self-hosted router reads a session's routing key from. */
export declare const ROUTING_KEY_HEADER: string;
// dist/testing.d.ts
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
import { GuardSessions } from "./fetch";
import { type Finding, Outcome } from "./sdk";
/** The prompts recorded by {@link recordPrompts}, and their findings. */
export declare class PromptRecorder {
    #private;
    /** Recorded here, reported by the assertion: no `CacheWarning` on the way. */
    readonly sessions: GuardSessions;
    constructor();
    /** Every observed request body, as sent, in order. */
    get bodies(): string[];
    /** Every finding, in order of the requests. */
    get findings(): Finding[];
    /** The error findings: cached content recomputed. */
    errors(): Finding[];
    /** Puts the global `fetch` back. */
    restore(): void;
    [Symbol.dispose](): void;
}
/** Records every prompt request sent through the global `fetch` until `restore()`. */
export declare function recordPrompts(): PromptRecorder;
/** What {@link assertPrefixStable} and the matcher judge. */
export type Recorded = PromptRecorder | GuardSessions | Outcome | Finding[] | object[];
/** Throws an `AssertionError` naming each cache break of what was recorded. */
export declare function assertPrefixStable(recorded: Recorded): void;
/** vitest's matchers: `expect.extend(kvlintMatchers)`, then
 * `expect(recorded).toKeepItsPrefix()` (and `.not.toKeepItsPrefix()`). */
export declare const kvlintMatchers: {
    toKeepItsPrefix(recorded: Recorded): {
        pass: boolean;
        message: () => string;
    };
};
