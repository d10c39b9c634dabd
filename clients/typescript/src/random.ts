/**
 * The default source of the jitter's random numbers: uniform in [0, 1).
 *
 * Where the platform has `crypto.getRandomValues` (browsers, Node 20+, React Native with a
 * polyfill such as `react-native-get-random-values`), each number is 53 random bits from it
 * divided by 2⁵³: one of the 2⁵³ multiples of 2⁻⁵³ in [0, 1), all equally likely. Elsewhere it is
 * `Math.random`. The jitter needs no secrecy; `getRandomValues` is preferred because its output
 * is specified to be uniform and unpredictable, while `Math.random`'s quality is up to the engine.
 */

/** 2⁵³: the number of 53-bit values. */
const TWO_TO_53 = 2 ** 53;
/** 2²⁶: the low word's share of the 53 bits. */
const TWO_TO_26 = 2 ** 26;

/** Fills an array with random words, as `crypto.getRandomValues` does. */
type Fill = (array: Uint32Array) => unknown;

/** The default random source: 53 bits of `crypto.getRandomValues`, else `Math.random`. */
export function defaultRandom(): () => number {
  const crypto = globalThis.crypto;
  if (typeof crypto?.getRandomValues !== 'function') {
    return Math.random;
  }
  return randomFrom((array) => crypto.getRandomValues(array));
}

/** A source of numbers in [0, 1), each from 53 bits `fill` writes into two 32-bit words. */
export function randomFrom(fill: Fill): () => number {
  const words = new Uint32Array(2);
  return () => {
    fill(words);
    // 27 bits from the first word and 26 from the second: 53 bits, divided by 2⁵³.
    const high = (words[0] ?? 0) >>> 5;
    const low = (words[1] ?? 0) >>> 6;
    return (high * TWO_TO_26 + low) / TWO_TO_53;
  };
}
