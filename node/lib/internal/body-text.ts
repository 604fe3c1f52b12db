/** The JSON text of one session's request bodies, turn after turn, exactly as `JSON.stringify`
 * writes each. An agent resends every earlier message each turn: a top-level value, or an item
 * of a top-level array (`messages`, `input`, `contents`, `tools`), that equals the previous
 * body's at the same place, by value, keeps that body's text instead of being serialized and
 * walked again. Equal by value, never by identity: an application that edits a message in
 * place gets its new text.
 *
 * Internal (not exported from the package): the guard's `observe` calls it. */

/** Serializes a value the body holds, refusing what JSON cannot carry; `trail` names its place
 * (the body's name, then keys and indexes), `ancestors` the values that enclose it. */
export type Serialize = (value: unknown, trail: (string | number)[], ancestors: object[]) => string;

/** A value as last sent: its text, and a copy parsed from that text (the application's own
 * object may have changed since). */
interface Sent {
  text: string;
  copy: unknown;
}

/** A top-level value as last sent: whole, or item by item for an array. */
type SentValue = { whole: Sent } | { items: Sent[] };

export class BodyText {
  #serialize: Serialize;
  #previous = new Map<string, SentValue>();

  constructor(serialize: Serialize) {
    this.#serialize = serialize;
  }

  /** `body`'s JSON text in pieces, whose concatenation is the text (`name` opens the paths
   * of errors): the pieces of the values sent again are the earlier strings, not copies. */
  pieces(body: object, name: string): string[] {
    if (!isPlainObject(body)) {
      return this.#whole(body, name);
    }
    const record = body as Record<string, unknown>;
    const sent = new Map<string, SentValue>();
    const pieces: string[] = [];
    for (const key of Object.keys(record)) {
      const value = record[key];
      if (value === undefined || typeof value === "function" || typeof value === "symbol") {
        continue; // JSON.stringify leaves the key out.
      }
      if (hasToJSON(value) || (Array.isArray(value) && value.some(hasToJSON))) {
        // JSON.stringify calls it with the key or index it is under: serialized whole.
        return this.#whole(body, name);
      }
      pieces.push(`${pieces.length === 0 ? "{" : ","}${JSON.stringify(key)}:`);
      const previous = this.#previous.get(key);
      if (Array.isArray(value) && isPlainArray(value)) {
        const before = previous !== undefined && "items" in previous ? previous.items : [];
        const items: Sent[] = [];
        pieces.push("[");
        // Index by index: a hole is `undefined` here, refused as JSON.stringify's walk refuses it.
        for (let index = 0; index < value.length; index += 1) {
          const item = this.#sent(value[index], before[index], [name, key, index], [record, value]);
          items.push(item);
          if (index > 0) {
            pieces.push(",");
          }
          pieces.push(item.text);
        }
        sent.set(key, { items });
        pieces.push("]");
      } else {
        const before = previous !== undefined && "whole" in previous ? previous.whole : undefined;
        const whole = this.#sent(value, before, [name, key], [record]);
        sent.set(key, { whole });
        pieces.push(whole.text);
      }
    }
    pieces.push(pieces.length === 0 ? "{}" : "}");
    this.#previous = sent;
    return pieces;
  }

  /** The body serialized in one piece, nothing kept for the next. */
  #whole(body: object, name: string): string[] {
    this.#previous.clear();
    return [this.#serialize(body, [name], [])];
  }

  #sent(value: unknown, previous: Sent | undefined, trail: (string | number)[], ancestors: object[]): Sent {
    if (previous !== undefined && sameJSON(value, previous.copy)) {
      return previous;
    }
    const text = this.#serialize(value, trail, ancestors);
    return { text, copy: JSON.parse(text) };
  }
}

function hasToJSON(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as { toJSON?: unknown }).toJSON === "function";
}

/** An object JSON.stringify writes as its own enumerable keys, with no `toJSON` of its own
 * to call: a plain object or a null-prototype one. */
function isPlainObject(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return false;
  }
  const prototype = Object.getPrototypeOf(value);
  return (prototype === Object.prototype || prototype === null) && !hasToJSON(value);
}

function isPlainArray(value: unknown[]): boolean {
  return Object.getPrototypeOf(value) === Array.prototype && !hasToJSON(value);
}

/** Whether `value` serializes to the text `copy` was parsed from. Conservative: `false` for
 * anything it does not read as JSON.stringify does by itself (a `toJSON`, a class instance,
 * a boxed primitive), which is then serialized. */
function sameJSON(value: unknown, copy: unknown): boolean {
  if (typeof value !== "object" || value === null) {
    // Strings compare by content; a number that is not finite is written `null`, and refused.
    return value === copy && (typeof value !== "number" || Number.isFinite(value));
  }
  if (typeof copy !== "object" || copy === null) {
    return false;
  }
  if (Array.isArray(value)) {
    if (!isPlainArray(value) || !Array.isArray(copy) || copy.length !== value.length) {
      return false;
    }
    for (let index = 0; index < value.length; index += 1) {
      if (!sameJSON(value[index], copy[index])) {
        return false;
      }
    }
    return true;
  }
  if (!isPlainObject(value) || Array.isArray(copy)) {
    return false;
  }
  const record = value as Record<string, unknown>;
  const copied = copy as Record<string, unknown>;
  const copiedKeys = Object.keys(copied);
  let matched = 0;
  for (const key of Object.keys(record)) {
    const item = record[key];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") {
      continue;
    }
    if (copiedKeys[matched] !== key || !sameJSON(item, copied[key])) {
      return false;
    }
    matched += 1;
  }
  return matched === copiedKeys.length;
}

const encoder = new TextEncoder();
/** Above this, a buffer much larger than the text it last held is given back. */
const KEPT_BYTES = 16 * 1024 * 1024;
let buffer = new Uint8Array(64 * 1024);

/** The UTF-8 bytes of the pieces' concatenation, for a native call to read at once: in one
 * buffer the calls share (JavaScript runs one at a time), valid until the next call. */
export function utf8(pieces: readonly string[]): Uint8Array {
  let length = 0;
  for (const piece of pieces) {
    length += piece.length;
  }
  // A UTF-16 code unit takes at most 3 bytes in UTF-8.
  const needed = length * 3;
  if (needed > buffer.length || (buffer.length > KEPT_BYTES && needed < buffer.length / 4)) {
    buffer = new Uint8Array(Math.max(needed, 64 * 1024));
  }
  let written = 0;
  for (const piece of pieces) {
    written += encoder.encodeInto(piece, buffer.subarray(written)).written;
  }
  return buffer.subarray(0, written);
}
