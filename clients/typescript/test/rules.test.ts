/**
 * The unit tests of `shared/src/retry/` (rules.rs, schedule.rs, progress.rs), ported, plus what
 * the vectors do not pin down: a wait that lands exactly on the deadline, and the nanosecond
 * arithmetic of Rust's `Duration::mul_f64`.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ActionProgress,
  type Next,
  type Seen,
  ceiling,
  classifyStatus,
  clientRules,
  defaultPreferWait,
  waitToAsk,
} from '../src/index.js';
import { multiplied } from '../src/nanos.js';

const SECOND = 1000;
const DEADLINE = 600 * SECOND;

function reply(status: number, retryAfterMs: number | null = null): Seen {
  return { kind: 'reply', status, retryAfterMs, keyState: null };
}

function send(afterMs: number): Next {
  return { kind: 'send', afterMs, headers: { Prefer: 'wait=10' } };
}

function lookUp(afterMs: number): Next {
  return { kind: 'look_up', afterMs, headers: { Prefer: 'wait=10' } };
}

test('the default wait is the timeout less the margin, in whole seconds', () => {
  assert.equal(waitToAsk(clientRules()), 10 * SECOND);
  assert.equal(defaultPreferWait(30.5 * SECOND), 25 * SECOND);
  assert.equal(defaultPreferWait(6 * SECOND), SECOND);
  assert.equal(defaultPreferWait(5 * SECOND), null);
});

test('the wait asked for is whole seconds strictly below the attempt timeout', () => {
  const asking = (preferWaitMs: number | null, attemptTimeoutMs: number) =>
    waitToAsk(clientRules({ preferWaitMs, attemptTimeoutMs }));
  assert.equal(asking(3.5 * SECOND, 15 * SECOND), 3 * SECOND);
  assert.equal(asking(15 * SECOND, 15 * SECOND), 14 * SECOND);
  assert.equal(asking(60 * SECOND, 15.5 * SECOND), 15 * SECOND);
  assert.equal(asking(5 * SECOND, SECOND), null, 'nothing below 1 s');
  assert.equal(asking(0.5 * SECOND, 15 * SECOND), null);
  assert.equal(asking(null, 15 * SECOND), null);
  assert.equal(asking(5 * SECOND, 0), null);
});

test('rules out of range are refused', () => {
  assert.throws(() => clientRules({ baseMs: -1 }), RangeError);
  assert.throws(() => clientRules({ deadlineMs: Number.POSITIVE_INFINITY }), RangeError);
  assert.throws(() => clientRules({ maxAttempts: 1.5 }), RangeError);
});

test('the ceiling doubles from base up to cap', () => {
  const rules = clientRules();
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8, 9].map((failed) => ceiling(rules, failed)),
    [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000],
  );
  assert.equal(ceiling(rules, 2 ** 32 - 1), 30_000);
});

test('replies are classified final or retry', () => {
  for (const status of [200, 201, 400, 401, 402, 404, 413, 422]) {
    assert.equal(classifyStatus(status), 'final', String(status));
  }
  for (const status of [409, 429, 500, 502, 503, 504, 599]) {
    assert.equal(classifyStatus(status), 'retry', String(status));
  }
});

test('a new action is sent at once and a final reply stops it for good', () => {
  for (const status of [201, 402, 404, 422]) {
    const { progress, next } = ActionProgress.start(clientRules(), 0);
    assert.deepEqual(next, send(0));
    assert.deepEqual(progress.next(reply(503), SECOND, 0.5), send(SECOND / 4));
    const stop: Next = { kind: 'stop', ending: { kind: 'replied', status, fromLookUp: false } };
    assert.deepEqual(progress.next(reply(status), 2 * SECOND, 0.5), stop);
    assert.equal(progress.attempts, 2);
    assert.deepEqual(progress.next(reply(503), 3 * SECOND, 0.5), stop);
  }
});

test('Retry-After is the floor, and the deadline turns sending into a look-up', () => {
  const { progress } = ActionProgress.start(clientRules(), 0);
  assert.deepEqual(progress.next(reply(429, 7 * SECOND), SECOND, 0.1), send(7 * SECOND));
  // The second wait's ceiling is 1 s: 0.9 of it from half a second before the deadline crosses it.
  assert.deepEqual(progress.next({ kind: 'no_reply' }, DEADLINE - SECOND / 2, 0.9), lookUp(0));
});

test('a wait that ends exactly at the deadline is a look-up; a nanosecond earlier, a send', () => {
  // After the first failure: half of the 500 ms ceiling.
  const at = (elapsedMs: number) =>
    ActionProgress.start(clientRules(), 0).progress.next(reply(503), elapsedMs, 0.5);
  assert.deepEqual(at(DEADLINE - 250), lookUp(0));
  assert.deepEqual(at(DEADLINE - 250.000001), send(250));
});

test('look-ups that tell nothing are bounded, then the action is unreachable', () => {
  const { progress, next } = ActionProgress.start(clientRules(), DEADLINE);
  assert.deepEqual(next, lookUp(0));
  assert.deepEqual(progress.next(reply(503), DEADLINE, 0.5), lookUp(SECOND / 4));
  assert.deepEqual(progress.next({ kind: 'no_reply' }, DEADLINE, 0.5), lookUp(SECOND / 2));
  assert.deepEqual(progress.next(reply(200), DEADLINE, 0.5), {
    kind: 'stop',
    ending: { kind: 'unsettled', why: 'unreachable' },
  });
});

test('look-ups settle, keep or end the action', () => {
  const cases: [Seen, Next][] = [
    [
      { kind: 'reply', status: 200, retryAfterMs: null, keyState: { state: 'done', status: 201 } },
      { kind: 'stop', ending: { kind: 'replied', status: 201, fromLookUp: true } },
    ],
    [
      { kind: 'reply', status: 200, retryAfterMs: null, keyState: { state: 'released' } },
      { kind: 'stop', ending: { kind: 'unsettled', why: 'released' } },
    ],
    [reply(404), { kind: 'stop', ending: { kind: 'not_received' } }],
    [reply(401), { kind: 'stop', ending: { kind: 'sign_in_required' } }],
  ];
  for (const [seen, expected] of cases) {
    const { progress } = ActionProgress.start(clientRules(), DEADLINE);
    assert.deepEqual(progress.next(seen, DEADLINE, 0.5), expected);
  }
});

test('a jitter unit outside [0, 1] is clamped; NaN is refused', () => {
  const after = (unit: number) =>
    ActionProgress.start(clientRules(), 0).progress.next(reply(503), 0, unit);
  assert.deepEqual(after(-3), send(0));
  assert.deepEqual(after(7), send(500));
  assert.throws(() => after(Number.NaN), RangeError);
});

test("waits are Rust's Duration::mul_f64, to the nanosecond", () => {
  // The examples of Rust's documentation of `Duration::mul_f64`.
  assert.equal(multiplied(2_700_000_000n, 3.14), 8_478_000_000n);
  assert.equal(multiplied(2_700_000_000n, 3.14e5), 847_800_000_000_000n);
  assert.equal(multiplied(500_000_000n, 0.999), 499_500_000n);
  // 1/1024 s is 976,562.5 ns exactly, and 3/1024 s 2,929,687.5 ns: ties go to the even nanosecond.
  assert.equal(multiplied(1_000_000_000n, 1 / 1024), 976_562n);
  assert.equal(multiplied(1_000_000_000n, 3 / 1024), 2_929_688n);
});
