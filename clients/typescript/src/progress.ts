/**
 * One action's course, as a pure state machine: a port of `ActionProgress` in
 * `shared/src/retry/progress.rs`, held to it by the test vectors in `shared/vectors/`. Given
 * what the last request came back with and the time since the action's first send, it says what
 * the client does next.
 *
 * An action is first *sent*: the saved key and body, again and again, until a final reply
 * (2xx, 402, another 4xx) or a 401. A retryable reply (409, 429, 5xx) or no reply at all is
 * followed by a wait of `uniform(0, ceiling)` with `Retry-After` as its floor. Once the next
 * wait would cross the deadline, or the attempts reach their bound, the key is *looked up*
 * instead (`GET /v1/idempotency-keys/{key}`): paying again cannot be the cure for not knowing.
 * A look-up that tells nothing is asked again a bounded number of times, then the action stays
 * saved as unreachable. Every request carries the same `Prefer: wait=N`.
 */

import type { KeyState } from './keyState.js';
import { type Nanos, longer, millisFromNanos, multiplied, nanosFromMillis } from './nanos.js';
import { type ClientRules, ceilingNanos, classifyStatus, waitToAsk } from './rules.js';

/** What one request (an attempt or a look-up) came back with. */
export type Seen =
  /** No reply: the request timed out or the connection failed. */
  | { readonly kind: 'no_reply' }
  | {
      readonly kind: 'reply';
      readonly status: number;
      /** Its `Retry-After` in milliseconds ({@link parseRetryAfter}), or `null`. */
      readonly retryAfterMs: number | null;
      /** For a look-up's 200, the key's state read from the body; `null` otherwise. */
      readonly keyState: KeyState | null;
    };

/** Why an outcome is not settled yet; the action stays saved for a later resume. */
export type Unsettled =
  /** The first attempt is still running on the server. */
  | 'started'
  /** The bank's reply is unknown; the server is asking the bank. */
  | 'unknown'
  /** The bank never received it and the key was released: nothing charged so far. */
  | 'released'
  /** The server could not be asked. */
  | 'unreachable';

/** How a run of an action ends. */
export type Ending =
  /** A final reply, from an attempt or (`fromLookUp`) from the key's status. */
  | { readonly kind: 'replied'; readonly status: number; readonly fromLookUp: boolean }
  /** The server has no record of the key: nothing was charged. */
  | { readonly kind: 'not_received' }
  /** The token was refused (401): sign in again and resume the same action. */
  | { readonly kind: 'sign_in_required' }
  | { readonly kind: 'unsettled'; readonly why: Unsettled };

/** The headers a move adds to its request: `Prefer: wait=N`, or none. */
export interface PreferHeaders {
  readonly Prefer?: string;
}

/** What the client does next. */
export type Next =
  /** Wait `afterMs`, then send the saved key and body, unchanged, with `headers`. */
  | { readonly kind: 'send'; readonly afterMs: number; readonly headers: PreferHeaders }
  /** Wait `afterMs`, then ask for the key's status, with `headers`. */
  | { readonly kind: 'look_up'; readonly afterMs: number; readonly headers: PreferHeaders }
  /** Stop: the run ends so. */
  | { readonly kind: 'stop'; readonly ending: Ending };

/** Whether the action stays saved for a later resume (its outcome is not known to be final). */
export function keepsAction(ending: Ending): boolean {
  return ending.kind === 'sign_in_required' || ending.kind === 'unsettled';
}

type Phase = 'sending' | 'looking_up' | { readonly stopped: Ending };

/** The course of one run of an action. */
export class ActionProgress {
  private sent = 0;
  private lookUps = 0;
  private phase: Phase = 'sending';

  private constructor(private readonly rules: ClientRules) {}

  /**
   * Starts a run `elapsedMs` after the action's first send (0 for a new action, more for a
   * resumed one): its first move is a send, or a look-up once the deadline has passed.
   */
  static start(rules: ClientRules, elapsedMs: number): { progress: ActionProgress; next: Next } {
    const progress = new ActionProgress(rules);
    const elapsed = elapsedNanos(elapsedMs);
    const next =
      elapsed < nanosFromMillis(rules.deadlineMs) && rules.maxAttempts > 0
        ? progress.send(0n)
        : progress.lookUp(0n);
    return { progress, next };
  }

  /** Attempts sent so far in this run (look-ups not counted). */
  get attempts(): number {
    return this.sent;
  }

  /**
   * The move after the last request came back with `seen`, `elapsedMs` after the action's
   * first send; `unit` is a random number in [0, 1) for the jitter (drawn whether or not it is
   * used). After a stop, it stays stopped.
   *
   * @throws RangeError when `elapsedMs` is negative or not finite, or a jitter is computed
   *   from a `unit` that is NaN (where the Rust rules panic).
   */
  next(seen: Seen, elapsedMs: number, unit: number): Next {
    const elapsed = elapsedNanos(elapsedMs);
    if (this.phase === 'sending') {
      return this.afterAttempt(seen, elapsed, unit);
    }
    if (this.phase === 'looking_up') {
      return this.afterLookUp(seen, unit);
    }
    return { kind: 'stop', ending: this.phase.stopped };
  }

  private afterAttempt(seen: Seen, elapsed: Nanos, unit: number): Next {
    let retryAfter: Nanos | null = null;
    if (seen.kind === 'reply') {
      if (seen.status === 401) {
        return this.stop({ kind: 'sign_in_required' });
      }
      if (classifyStatus(seen.status) === 'final') {
        return this.stop({ kind: 'replied', status: seen.status, fromLookUp: false });
      }
      retryAfter = floorOf(seen);
    }
    // RetrySchedule::next_step: the jittered wait, Retry-After as its floor, unless it would
    // cross the deadline.
    const wait = flooredJitter(ceilingNanos(this.rules, this.sent), unit, retryAfter);
    if (elapsed + wait >= nanosFromMillis(this.rules.deadlineMs)) {
      return this.lookUp(0n);
    }
    return this.sent < this.rules.maxAttempts ? this.send(wait) : this.lookUp(wait);
  }

  private afterLookUp(seen: Seen, unit: number): Next {
    let retryAfter: Nanos | null = null;
    if (seen.kind === 'reply') {
      if (seen.status === 200 && seen.keyState !== null) {
        return this.stop(endingOf(seen.keyState));
      }
      if (seen.status === 404) {
        return this.stop({ kind: 'not_received' });
      }
      if (seen.status === 401) {
        return this.stop({ kind: 'sign_in_required' });
      }
      retryAfter = floorOf(seen);
    }
    return this.lookUp(flooredJitter(ceilingNanos(this.rules, this.lookUps), unit, retryAfter));
  }

  private send(after: Nanos): Next {
    this.sent += 1;
    return { kind: 'send', afterMs: millisFromNanos(after), headers: this.preferHeaders() };
  }

  private lookUp(after: Nanos): Next {
    if (this.lookUps >= this.rules.statusLookUps) {
      return this.stop({ kind: 'unsettled', why: 'unreachable' });
    }
    this.phase = 'looking_up';
    this.lookUps += 1;
    return { kind: 'look_up', afterMs: millisFromNanos(after), headers: this.preferHeaders() };
  }

  private stop(ending: Ending): Next {
    this.phase = { stopped: ending };
    return { kind: 'stop', ending };
  }

  private preferHeaders(): PreferHeaders {
    const wait = waitToAsk(this.rules);
    return wait === null ? {} : { Prefer: `wait=${wait / 1000}` };
  }
}

function endingOf(state: KeyState): Ending {
  return state.state === 'done'
    ? { kind: 'replied', status: state.status, fromLookUp: true }
    : { kind: 'unsettled', why: state.state };
}

function floorOf(seen: { readonly retryAfterMs: number | null }): Nanos | null {
  return seen.retryAfterMs === null ? null : nanosFromMillis(seen.retryAfterMs);
}

/** `unit`'s share of `ceiling` (the unit clamped to [0, 1]), never below `floor`. */
function flooredJitter(ceiling: Nanos, unit: number, floor: Nanos | null): Nanos {
  if (Number.isNaN(unit)) {
    throw new RangeError('the jitter unit must be a number in [0, 1), not NaN');
  }
  const jittered = multiplied(ceiling, Math.min(Math.max(unit, 0), 1));
  return floor === null ? jittered : longer(jittered, floor);
}

function elapsedNanos(elapsedMs: number): Nanos {
  if (!Number.isFinite(elapsedMs) || elapsedMs < 0) {
    throw new RangeError(`the elapsed time must be finite and not negative: ${elapsedMs}`);
  }
  return nanosFromMillis(elapsedMs);
}
