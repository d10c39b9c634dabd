/**
 * The run of one saved action: {@link ActionProgress} decides every move, this loop makes them
 * on a clock and a transport, reports what happens, and ends the action as the rules stop it
 * (a port of the Rust client's `attempt_loop` and `status_check`).
 *
 * Each attempt sends the saved key and body, unchanged. After a stop, a final reply or a key
 * the server never received removes the action from the store; anything else keeps it saved.
 *
 * A run is one trace: its attempts and look-ups share one trace id, minted when the run starts
 * (a run resumed after a restart starts a new trace; the key still ties the two together).
 */

import type { Clock } from './clock.js';
import { describe } from './errors.js';
import type { ClientEvent } from './events.js';
import type { Exchange, HttpTransport, Reply } from './http.js';
import { keyStateFromBody, knownByOf, readKeyStatus } from './keyState.js';
import { ActionProgress, type Ending, type Next, type Seen } from './progress.js';
import { type ActionResult, type ResultBase, finalResult } from './results.js';
import { type ClientRules, waitToAsk } from './rules.js';
import type { ActionStore, SavedAction } from './store.js';
import { newTraceId } from './traceparent.js';

/** What a run needs from its client. */
export interface RunContext {
  readonly rules: ClientRules;
  readonly transport: HttpTransport;
  readonly store: ActionStore;
  readonly clock: Clock;
  /** A uniform random number in [0, 1) for the jitter; one is drawn per request. */
  readonly random: () => number;
  readonly report: (event: ClientEvent) => void;
}

/** The last reply a run has seen, kept for the final reply the rules may stop on. */
type LastReply = { readonly from: 'attempt' | 'look_up'; readonly reply: Reply } | null;

/**
 * Runs `action` (already saved) until its outcome is known or its look-ups are spent. A resumed
 * action past its deadline is not sent again: its outcome is looked up.
 */
export async function runAction(context: RunContext, action: SavedAction): Promise<ActionResult> {
  const { clock, report, transport } = context;
  const { key } = action;
  const traceId = newTraceId();
  const elapsedMs = () => Math.max(0, clock.nowMs() - action.startedAtMs);
  const waitMs = waitToAsk(context.rules);
  const preferWaitSeconds = waitMs === null ? null : waitMs / 1000;
  const started = ActionProgress.start(context.rules, elapsedMs());
  const { progress } = started;
  let next: Next = started.next;
  let last: LastReply = null;
  let lastRetryAfterMs: number | null = null;
  let lookUps = 0;
  let firstOfPhase = true;

  /** Waits before a request, reported, except the unannounced zero wait of a phase's first. */
  const pause = async (ms: number) => {
    if (firstOfPhase && ms === 0) {
      return;
    }
    report({ type: 'waiting', key, ms, retryAfterMs: lastRetryAfterMs });
    await clock.sleep(ms);
  };

  for (;;) {
    let seen: Seen;
    if (next.kind === 'send') {
      await pause(next.afterMs);
      firstOfPhase = false;
      const attempt = progress.attempts;
      report({ type: 'sending', key, attempt, preferWaitSeconds });
      const exchange = await transport.send(action, next.headers, traceId);
      if (exchange.kind === 'reply') {
        const { status, replayed, waitedSeconds } = exchange.reply;
        report({ type: 'replied', key, attempt, status, replayed, waitedSeconds });
      } else {
        report({ type: 'no_reply', key, attempt, reason: exchange.reason });
      }
      last = exchange.kind === 'reply' ? { from: 'attempt', reply: exchange.reply } : null;
      seen = seenOf(exchange, false);
    } else if (next.kind === 'look_up') {
      if (lookUps === 0) {
        firstOfPhase = true;
      }
      await pause(next.afterMs);
      if (lookUps === 0) {
        report({ type: 'stopped_sending', key, attempts: progress.attempts });
      }
      firstOfPhase = false;
      lookUps += 1;
      report({ type: 'looking_up', key, check: lookUps });
      const exchange = await transport.lookUp(key, next.headers, traceId);
      seen = seenOf(exchange, true);
      const failure = lookUpFailure(exchange, seen);
      if (failure !== null) {
        report({ type: 'look_up_failed', key, check: lookUps, reason: failure });
      }
      last = exchange.kind === 'reply' ? { from: 'look_up', reply: exchange.reply } : null;
    } else {
      return finish(context, action, progress.attempts, next.ending, last);
    }
    lastRetryAfterMs = seen.kind === 'reply' ? seen.retryAfterMs : null;
    next = progress.next(seen, elapsedMs(), context.random());
  }
}

/** What the rules see of an exchange: a look-up's 200 body read as a key status. */
function seenOf(exchange: Exchange, lookUp: boolean): Seen {
  if (exchange.kind === 'no_reply') {
    return { kind: 'no_reply' };
  }
  const { status, retryAfterMs, bodyText } = exchange.reply;
  const keyState = lookUp && status === 200 ? keyStateFromBody(bodyText) : null;
  return { kind: 'reply', status, retryAfterMs, keyState };
}

/** Why a look-up told nothing, or `null` when it told something (a state, 401, 404). */
function lookUpFailure(exchange: Exchange, seen: Seen): string | null {
  if (exchange.kind === 'no_reply') {
    return exchange.reason;
  }
  const { status } = exchange.reply;
  if (status === 200) {
    return seen.kind === 'reply' && seen.keyState === null ? 'unreadable status' : null;
  }
  return status === 401 || status === 404 ? null : `replied ${status}`;
}

/**
 * Ends the run as the rules stopped it: a final reply or a key never received removes the
 * action; anything else keeps it saved.
 */
async function finish(
  context: RunContext,
  action: SavedAction,
  attempts: number,
  ending: Ending,
  last: LastReply,
): Promise<ActionResult> {
  const result = resultOf({ key: action.key, operation: action.operation, attempts }, ending, last);
  const keptAction = result.kind === 'pending' || result.kind === 'sign_in_required';
  if (!keptAction) {
    try {
      await context.store.remove(action.key);
    } catch (error) {
      context.report({ type: 'forget_failed', key: action.key, reason: describe(error) });
    }
  }
  context.report({ type: 'stopped', key: action.key, result: result.kind, keptAction });
  return result;
}

function resultOf(base: ResultBase, ending: Ending, last: LastReply): ActionResult {
  switch (ending.kind) {
    case 'replied':
      return (
        repliedResult(base, last) ?? {
          kind: 'pending',
          ...base,
          why: 'unreachable',
          knownBy: null,
        }
      );
    case 'unsettled':
      return {
        kind: 'pending',
        ...base,
        why: ending.why,
        knownBy: last === null ? null : knownByOf(last.reply.bodyText),
      };
    case 'not_received':
    case 'sign_in_required':
      return { kind: ending.kind, ...base };
  }
}

/**
 * The final reply the rules stopped on: the attempt's reply, or the saved reply a `done`
 * key's status carries; `null` when there is none to read (the action then stays saved).
 */
function repliedResult(base: ResultBase, last: LastReply): ActionResult | null {
  if (last === null) {
    return null;
  }
  const { reply } = last;
  const waitedForFirstAttempt = reply.waitedSeconds !== null;
  if (last.from === 'attempt') {
    const { status, replayed, bodyText } = reply;
    return finalResult(base, {
      status,
      replayed,
      fromStatusLookUp: false,
      waitedForFirstAttempt,
      bodyText,
    });
  }
  const keyStatus = readKeyStatus(reply.bodyText);
  if (keyStatus === null || keyStatus.keyState.state !== 'done') {
    return null;
  }
  return finalResult(base, {
    status: keyStatus.keyState.status,
    replayed: true,
    fromStatusLookUp: true,
    waitedForFirstAttempt,
    // The saved reply, parsed with the key status; as text again for the typed result.
    bodyText: JSON.stringify(keyStatus.reply),
  });
}
