/**
 * The shared test vectors run through the rules: every case through {@link ActionProgress}
 * exactly as the file's `about` says, and every `Retry-After` value through
 * {@link parseRetryAfter}. A difference is a client that drifted from the Rust rules.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ActionProgress,
  type Next,
  type Seen,
  keyStateFromBody,
  parseRetryAfter,
} from '../src/index.js';
import {
  VECTORS_PATH,
  type VectorMove,
  type VectorSeen,
  rulesOf,
  stopOf,
  vectors,
} from './support/vectors.js';

test('the vector file has cases and Retry-After values to run', () => {
  assert.ok(
    Array.isArray(vectors.cases) && vectors.cases.length > 0,
    `no cases in ${VECTORS_PATH}`,
  );
  assert.ok(
    Array.isArray(vectors.retry_after) && vectors.retry_after.length > 0,
    'no retry_after values',
  );
});

for (const vector of vectors.cases ?? []) {
  test(`vector: ${vector.name}`, () => {
    const { progress, next: first } = ActionProgress.start(
      rulesOf(vector.rules),
      vector.starts_at_ms,
    );
    assertMove(first, vector.first, 'first move');
    assert.ok(vector.steps.length > 0, 'a case has steps');
    vector.steps.forEach((step, index) => {
      const next = progress.next(seenOf(step.seen), step.at_ms, step.unit);
      assertMove(next, step.next, `step ${index + 1} at ${step.at_ms} ms`);
    });
  });
}

test('vector: every Retry-After value reads as the Rust rules read it', () => {
  for (const { value, seconds } of vectors.retry_after) {
    assert.equal(
      parseRetryAfter(value),
      seconds === null ? null : seconds * 1000,
      JSON.stringify(value),
    );
  }
});

function seenOf(seen: VectorSeen): Seen {
  if ('no_reply' in seen) {
    return { kind: 'no_reply' };
  }
  return {
    kind: 'reply',
    status: seen.status,
    retryAfterMs: seen.retry_after === undefined ? null : parseRetryAfter(seen.retry_after),
    keyState: seen.status === 200 && seen.body !== undefined ? keyStateFromBody(seen.body) : null,
  };
}

function assertMove(actual: Next, expected: VectorMove, where: string): void {
  if ('stop' in expected) {
    assert.equal(actual.kind, 'stop', `${where}: ${JSON.stringify(actual)}`);
    if (actual.kind === 'stop') {
      assert.deepEqual(stopOf(actual.ending), expected.stop, where);
    }
    return;
  }
  const [kind, move] =
    'send' in expected
      ? (['send', expected.send] as const)
      : (['look_up', expected.look_up] as const);
  assert.equal(actual.kind, kind, `${where}: ${JSON.stringify(actual)}`);
  assert.ok(
    Math.abs(actual.afterMs - move.after_ms) <= 0.001,
    `${where}: waits ${actual.afterMs} ms, not ${move.after_ms}`,
  );
  assert.deepEqual({ ...actual.headers }, move.headers, `${where}: headers`);
}
