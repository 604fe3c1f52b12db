// A user's TypeScript against the installed package's types: type-checked by tsc in a clean
// project (scripts/test-package.sh), then run from its ES module and CommonJS forms.
import { Conversation, Guard, GuardError, type Finding, type TierChange, check, guardFetch } from "kvlint-cache";

const conversation = new Conversation({ strict: true });
const change: TierChange = conversation.addStatic("You are a careful coding agent.");
conversation.pushUser("Why does the parser test fail?");
const guard = new Guard({ mode: "error" });
const body = conversation.toOpenAIChat("gpt-4o");
const findings: Finding[] = guard.observe(body).findings;
const fetch: typeof globalThis.fetch = guardFetch(() => new Guard());
const refused: boolean = new GuardError("x", []) instanceof Error;
console.log(JSON.stringify({ applied: change.applied, findings: findings.length, reused: check([body, body]).reusedTokens, fetch: typeof fetch, refused }));
