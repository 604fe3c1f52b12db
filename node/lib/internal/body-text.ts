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

/** A value as last sent: its text, and a copy read from that text (the application's own
 * object may have changed since). */
interface Sent {
  text: string;
  copy: Copy;
}

/** A JSON value as read back: primitives, arrays of copies, and objects as their keys and
 * values in order (so that comparing with one enumerates no keys of its own). */
type Copy = null | boolean | number | string | Copy[] | CopiedObject;

class CopiedObject {
  constructor(
    readonly keys: string[],
    readonly values: Copy[],
  ) {}
}

/** The copy of `parsed`, read from the text of `original`: its strings are the application's
 * own where they are equal, so that comparing with a string the application sends again
 * compares two references, not two texts. */
function copyOf(parsed: unknown, original: unknown): Copy {
  if (typeof parsed === "string") {
    return parsed === original ? original : parsed;
  }
  const source = typeof original === "object" && original !== null ? (original as Record<string, unknown>) : undefined;
  if (Array.isArray(parsed)) {
    return parsed.map((item, index) => copyOf(item, Array.isArray(source) ? source[index] : undefined));
  }
  if (typeof parsed === "object" && parsed !== null) {
    const record = parsed as Record<string, unknown>;
    const keys = Object.keys(record);
    return new CopiedObject(
      keys,
      keys.map((key) => copyOf(record[key], source === undefined || Array.isArray(source) ? undefined : source[key])),
    );
  }
  return parsed as Copy;
}

/** A top-level value as last sent: whole, or item by item for an array. */
type SentValue = { whole: Sent } | { items: Sent[] };

export class BodyText {
  #serialize: Serialize;
  #previous = new Map<string, SentValue>();
  /** The UTF-8 of the pieces last encoded, and where each ends in it. */
  #encoded = new Utf8Buffer();
  #encodedPieces: readonly string[] = [];
  #ends: number[] = [];

  constructor(serialize: Serialize) {
    this.#serialize = serialize;
  }

  /** `body`'s JSON text as UTF-8, for a native call to read at once: in a buffer of this
   * object's, valid until its next call. The head of the text the previous body shares is
   * already in place, not encoded again. */
  utf8(body: object, name: string): Uint8Array {
    const pieces = this.pieces(body, name);
    const before = this.#encodedPieces;
    let same = 0;
    while (same < pieces.length && same < before.length && pieces[same] === before[same]) {
      same += 1;
    }
    const length = this.#encoded.write(pieces, same, this.#ends[same - 1] ?? 0, this.#ends);
    this.#encodedPieces = pieces;
    return this.#encoded.bytes.subarray(0, length);
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
          const item = this.#sent(value[index], before[index], name, key, index, record, value);
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
        const whole = this.#sent(value, before, name, key, undefined, record, undefined);
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

  /** `value`, under `key` of the body and at `index` of its array if it is an item, as sent:
   * `previous` if it is sent again. (The path and ancestors a serialization error names are
   * built only then: a turn that sends its history again allocates next to nothing.) */
  #sent(
    value: unknown,
    previous: Sent | undefined,
    name: string,
    key: string,
    index: number | undefined,
    body: object,
    array: unknown[] | undefined,
  ): Sent {
    if (previous !== undefined && sameJSON(value, previous.copy)) {
      return previous;
    }
    const text =
      index === undefined || array === undefined
        ? this.#serialize(value, [name, key], [body])
        : this.#serialize(value, [name, key, index], [body, array]);
    return { text, copy: copyOf(JSON.parse(text), value) };
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

/** Whether `value` serializes to the text `copy` was read from. Conservative: `false` for
 * anything it does not read as JSON.stringify does by itself (a `toJSON`, a class instance,
 * a boxed primitive, an enumerable key inherited), which is then serialized. Allocates
 * nothing: it runs on every item a turn sends again. */
function sameJSON(value: unknown, copy: Copy | undefined): boolean {
  if (typeof value !== "object" || value === null) {
    // Strings compare by content; a number that is not finite is written `null`, and refused.
    return value === copy && (typeof value !== "number" || Number.isFinite(value));
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
  if (!isPlainObject(value) || !(copy instanceof CopiedObject)) {
    return false;
  }
  const record = value as Record<string, unknown>;
  let matched = 0;
  // Own enumerable keys in JSON.stringify's order, then inherited ones, which fail the match.
  for (const key in record) {
    const item = record[key];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") {
      continue;
    }
    if (copy.keys[matched] !== key || !sameJSON(item, copy.values[matched])) {
      return false;
    }
    matched += 1;
  }
  return matched === copy.keys.length;
}

const encoder = new TextEncoder();
/** Above this, a buffer much larger than the text it last held is given back. */
const KEPT_BYTES = 16 * 1024 * 1024;

/** UTF-8 text in a buffer reused from call to call. */
class Utf8Buffer {
  bytes = new Uint8Array(64 * 1024);

  /** Writes `pieces` from index `first` on after the `start` bytes already written, records
   * where each ends in `ends` if given, and returns the length written. */
  write(pieces: readonly string[], first: number, start: number, ends?: number[]): number {
    let units = 0;
    for (let index = first; index < pieces.length; index += 1) {
      units += pieces[index]?.length ?? 0;
    }
    // A UTF-16 code unit takes at most 3 bytes in UTF-8.
    const needed = start + units * 3;
    if (needed > this.bytes.length || (this.bytes.length > KEPT_BYTES && needed < this.bytes.length / 4)) {
      const grown = new Uint8Array(Math.max(needed + (needed >> 1), 64 * 1024));
      grown.set(this.bytes.subarray(0, start));
      this.bytes = grown;
    }
    if (ends !== undefined) {
      ends.length = first;
    }
    let written = start;
    for (let index = first; index < pieces.length; index += 1) {
      written += encoder.encodeInto(pieces[index] ?? "", this.bytes.subarray(written)).written;
      ends?.push(written);
    }
    return written;
  }
}

const shared = new Utf8Buffer();

/** `text` as UTF-8, for a native call to read at once: in one buffer such calls share
 * (JavaScript runs one at a time), valid until the next. */
export function utf8(text: string): Uint8Array {
  const length = shared.write([text], 0, 0);
  return shared.bytes.subarray(0, length);
}
