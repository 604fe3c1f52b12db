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
import { toJSONText } from "./sdk";

/** What the middleware reads of a call's result. */
interface SentRequest {
  request?: { body?: unknown };
}

/** A `LanguageModelMiddleware` of the AI SDK (its `v4` specification), with its sessions. */
export interface KvlintMiddleware {
  readonly specificationVersion: "v4";
  wrapGenerate<Result extends SentRequest>(options: { doGenerate: () => PromiseLike<Result> }): Promise<Result>;
  wrapStream<Result extends SentRequest>(options: { doStream: () => PromiseLike<Result> }): Promise<Result>;
  readonly kvlintGuard: GuardSessions;
}

/** A middleware for `wrapLanguageModel({model, middleware})`. `guard`: as {@link guardFetch}
 * takes it. */
export function kvlintMiddleware(guard?: GuardLike | GuardSessions): KvlintMiddleware {
  const sessions = guard instanceof GuardSessions ? guard : new GuardSessions(guard);
  const observeSent = <Result extends SentRequest>(result: Result, sentFrom: Error): Result => {
    const body = result.request?.body;
    if (body !== undefined) {
      sessions.observe(typeof body === "string" ? body : toJSONText(body, "request.body"), [], 0, sentFrom);
    }
    return result;
  };
  // Each `sentFrom` is made before the first await, while the application's call is on the
  // stack: a warning names it.
  return {
    specificationVersion: "v4",
    async wrapGenerate({ doGenerate }) {
      const sentFrom = new Error();
      return observeSent(await doGenerate(), sentFrom);
    },
    async wrapStream({ doStream }) {
      const sentFrom = new Error();
      return observeSent(await doStream(), sentFrom);
    },
    kvlintGuard: sessions,
  };
}
