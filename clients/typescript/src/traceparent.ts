/**
 * The W3C Trace Context header every request carries (`traceparent`,
 * <https://www.w3.org/TR/trace-context/>), so the edge and the backend join the client's trace:
 * version `00`, the action's trace id, a span id of the request's own, flags `01` (sampled).
 *
 * One run of an action is one trace: every attempt and look-up shares its trace id, and each
 * request is a new span. Ids are lower-case hex and never all zeros (an all-zero draw gets its
 * last bit set, as `shared::trace_context` does). Their bytes come from
 * `crypto.getRandomValues`, else `Math.random`: a trace id needs to be unlikely to repeat, not
 * secret.
 */

import { lowerHex } from './hex.js';

/** The header's name, lower-case as the recommendation writes it. */
export const TRACEPARENT_HEADER = 'traceparent';

/** Fills `bytes` with random bytes, as `crypto.getRandomValues` does. */
export type FillBytes = (bytes: Uint8Array) => unknown;

/** A new trace's id: 16 random bytes, 32 hex digits. */
export function newTraceId(fill: FillBytes = platformFill()): string {
  return randomId(16, fill);
}

/** The `traceparent` of a new span (8 random bytes) in trace `traceId`. */
export function traceparentIn(traceId: string, fill: FillBytes = platformFill()): string {
  return `00-${traceId}-${randomId(8, fill)}-01`;
}

/** `length` random bytes as hex, never all zeros. */
function randomId(length: number, fill: FillBytes): string {
  const bytes = new Uint8Array(length);
  fill(bytes);
  if (bytes.every((byte) => byte === 0)) {
    bytes[length - 1] = 1;
  }
  return lowerHex(bytes);
}

/** `crypto.getRandomValues` where the platform has it, else bytes from `Math.random`. */
function platformFill(): FillBytes {
  const crypto = globalThis.crypto;
  if (typeof crypto?.getRandomValues === 'function') {
    return (bytes) => crypto.getRandomValues(bytes);
  }
  return (bytes) => {
    for (let index = 0; index < bytes.length; index += 1) {
      bytes[index] = Math.floor(Math.random() * 256);
    }
  };
}
