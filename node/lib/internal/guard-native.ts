/** Each Guard's native handle, for the sessions that observe through it (`GuardSessions` hands
 * a factory's guard to the native multiplexer).
 *
 * Internal (not exported from the package): `Guard`'s constructor registers its handle. */

import type * as native from "#native";

const handles = new WeakMap<object, native.NativeGuard>();

export function registerGuard(guard: object, handle: native.NativeGuard): void {
  handles.set(guard, handle);
}

/** The native handle of a Guard; a TypeError for anything else. */
export function nativeGuardOf(guard: object): native.NativeGuard {
  const handle = handles.get(guard);
  if (!handle) {
    throw new TypeError("GuardSessions: the guard factory must return a kvlint-cache Guard");
  }
  return handle;
}
