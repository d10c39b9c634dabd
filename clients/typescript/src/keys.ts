/**
 * The `Idempotency-Key` of each new action, when the client is not given its own `mintKey`: a
 * random (version 4) UUID from the platform's Web Crypto, asked at every new action (so a
 * polyfill installed after the client was built still counts).
 *
 * `crypto.randomUUID` when there is one (browsers, Node); else a UUID built from 16 bytes of
 * `crypto.getRandomValues`, as RFC 9562 §5.4 describes version 4 (React Native on Hermes, where
 * `react-native-get-random-values` provides only that). Never `Math.random`: a key must not
 * collide with another user action's, and an engine's `Math.random` makes no such promise.
 */

import { lowerHex } from './hex.js';

/** The parts of Web Crypto a key is made from; a platform may lack either, or both. */
export interface KeyCrypto {
  readonly randomUUID?: () => string;
  readonly getRandomValues?: (array: Uint8Array) => unknown;
}

/** What to do on a platform that can make no key. */
const NO_KEY_SOURCE =
  'cannot make an Idempotency-Key: this platform has neither crypto.randomUUID nor ' +
  'crypto.getRandomValues. On React Native, install react-native-get-random-values and import ' +
  'it before this package, or pass options.mintKey to PaymentsClient';

/**
 * A fresh random (version 4) UUID from `crypto` (the platform's is `globalThis.crypto`, which
 * Hermes lacks without a polyfill).
 *
 * @throws Error, saying what to install or inject, when `crypto` has neither function.
 */
export function randomKey(crypto: KeyCrypto | undefined): string {
  if (typeof crypto?.randomUUID === 'function') {
    return crypto.randomUUID();
  }
  if (typeof crypto?.getRandomValues === 'function') {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return uuidV4FromBytes(bytes);
  }
  throw new Error(NO_KEY_SOURCE);
}

/**
 * The version 4 UUID of 16 random bytes: the version nibble set to 4 and the variant bits to
 * `10` (RFC 9562), written lower-case as 8-4-4-4-12 hex digits. `bytes` is not changed.
 */
export function uuidV4FromBytes(bytes: Uint8Array): string {
  if (bytes.length !== 16) {
    throw new RangeError(`a UUID is 16 bytes, not ${bytes.length}`);
  }
  const uuid = Uint8Array.from(bytes);
  uuid[6] = ((uuid[6] ?? 0) & 0x0f) | 0x40;
  uuid[8] = ((uuid[8] ?? 0) & 0x3f) | 0x80;
  const hex = lowerHex(uuid);
  return [
    hex.slice(0, 8),
    hex.slice(8, 12),
    hex.slice(12, 16),
    hex.slice(16, 20),
    hex.slice(20),
  ].join('-');
}
