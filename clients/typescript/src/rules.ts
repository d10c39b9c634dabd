/**
 * How patient a client is, as `shared/src/retry/rules.rs` and `schedule.rs` define it: the
 * retry schedule (500 ms doubling to a 30 s ceiling, full jitter, a 10-minute deadline), how
 * long one attempt may take, how long the server is asked to wait for the key's first attempt
 * (`Prefer: wait=N`), and the bounds that keep every loop finite. Durations are milliseconds.
 *
 * `Prefer: wait` is sent in whole seconds and always held strictly below the attempt timeout,
 * so that a 409 from a server whose wait ran out reaches the client before the client gives up
 * on the attempt (SPEC §4, §6).
 */

import { type Nanos, millisFromNanos, nanosFromMillis, shorter, wholeSecondsOf } from './nanos.js';

/** A client's settings; build them with {@link clientRules}. */
export interface ClientRules {
  /** The ceiling of the first wait; it doubles after each failed attempt. */
  readonly baseMs: number;
  /** The largest ceiling. */
  readonly capMs: number;
  /** After this long since the action's first send, stop sending and look the key up. */
  readonly deadlineMs: number;
  /** How long one attempt (or one look-up) waits for a reply. */
  readonly attemptTimeoutMs: number;
  /**
   * How long the server is asked to wait for the key's first attempt; `null` sends no
   * `Prefer` header. Sent in whole seconds, strictly below `attemptTimeoutMs` ({@link waitToAsk}).
   */
  readonly preferWaitMs: number | null;
  /** A hard bound on attempts per run, whatever the clock says. */
  readonly maxAttempts: number;
  /** How many look-ups to try after the deadline before reporting "unreachable". */
  readonly statusLookUps: number;
}

/** How much shorter than the attempt timeout the default `Prefer: wait` is. */
export const PREFER_WAIT_MARGIN_MS = 5_000;

const DEFAULT_ATTEMPT_TIMEOUT_MS = 15_000;

/**
 * The default wait for an attempt timeout: {@link PREFER_WAIT_MARGIN_MS} less, in whole
 * seconds; `null` when that leaves nothing (a timeout of 6 s or less asks for 1 s at most).
 */
export function defaultPreferWait(attemptTimeoutMs: number): number | null {
  const timeout = nanosFromMillis(checkedMillis('attemptTimeoutMs', attemptTimeoutMs));
  const margin = nanosFromMillis(PREFER_WAIT_MARGIN_MS);
  return wholeSecondsMillis(timeout > margin ? timeout - margin : 0n);
}

/**
 * The article's app (the Rust `ClientRules::default()`) with `overrides` applied. Changing
 * `attemptTimeoutMs` without naming `preferWaitMs` recomputes the wait with
 * {@link defaultPreferWait}; `preferWaitMs: null` turns waiting off.
 *
 * @throws RangeError when a duration is negative or not finite, or a bound is not a whole
 *   number from 0 to 2^32 − 1.
 */
export function clientRules(overrides: Partial<ClientRules> = {}): ClientRules {
  const attemptTimeoutMs = overrides.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  const preferWaitMs =
    overrides.preferWaitMs === undefined
      ? defaultPreferWait(attemptTimeoutMs)
      : overrides.preferWaitMs;
  return {
    baseMs: checkedMillis('baseMs', overrides.baseMs ?? 500),
    capMs: checkedMillis('capMs', overrides.capMs ?? 30_000),
    deadlineMs: checkedMillis('deadlineMs', overrides.deadlineMs ?? 600_000),
    attemptTimeoutMs: checkedMillis('attemptTimeoutMs', attemptTimeoutMs),
    preferWaitMs: preferWaitMs === null ? null : checkedMillis('preferWaitMs', preferWaitMs),
    maxAttempts: checkedCount('maxAttempts', overrides.maxAttempts ?? 100),
    statusLookUps: checkedCount('statusLookUps', overrides.statusLookUps ?? 3),
  };
}

/**
 * The wait actually asked for, in milliseconds of whole seconds: `preferWaitMs` rounded down
 * to whole seconds and held to the largest whole second strictly below `attemptTimeoutMs`;
 * `null` when off or zero.
 */
export function waitToAsk(rules: ClientRules): number | null {
  if (rules.preferWaitMs === null) {
    return null;
  }
  const timeout = nanosFromMillis(rules.attemptTimeoutMs);
  const longest = timeout > 0n ? timeout - 1n : 0n;
  return wholeSecondsMillis(shorter(nanosFromMillis(rules.preferWaitMs), longest));
}

/** The ceiling of the wait after `failedAttempts` failures: `min(cap, base · 2^(n − 1))`. */
export function ceiling(rules: ClientRules, failedAttempts: number): number {
  return millisFromNanos(ceilingNanos(rules, failedAttempts));
}

/** {@link ceiling} in nanoseconds, for the rules' own arithmetic. */
export function ceilingNanos(rules: ClientRules, failedAttempts: number): Nanos {
  const doublings = Math.min(Math.max(failedAttempts - 1, 0), 31);
  const grown = nanosFromMillis(rules.baseMs) << BigInt(doublings);
  return shorter(grown, nanosFromMillis(rules.capMs));
}

/** How a client must treat a reply's status. */
export type ReplyClass = 'final' | 'retry';

/**
 * 409 (in progress), 429 (rate limited) and 5xx (outcome pending, a proxy) are retried with the
 * same key and body; a 2xx, a 402 decline and any other status are final. Retrying a 5xx is
 * safe: the server never saves a server error as a final reply.
 */
export function classifyStatus(status: number): ReplyClass {
  return status === 409 || status === 429 || (status >= 500 && status <= 599) ? 'retry' : 'final';
}

function wholeSecondsMillis(duration: Nanos): number | null {
  const seconds = wholeSecondsOf(duration);
  return seconds === 0 ? null : seconds * 1000;
}

function checkedMillis(name: string, ms: number): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`${name} must be a finite number of milliseconds, not negative: ${ms}`);
  }
  return ms;
}

function checkedCount(name: string, count: number): number {
  if (!Number.isInteger(count) || count < 0 || count > 0xffff_ffff) {
    throw new RangeError(`${name} must be a whole number from 0 to 4294967295: ${count}`);
  }
  return count;
}
