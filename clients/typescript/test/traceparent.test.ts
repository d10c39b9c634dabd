/** The `traceparent` ids: lower-case hex of their length, random, never all zeros. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { newTraceId, traceparentIn } from '../src/traceparent.js';

const zeros = (bytes: Uint8Array) => bytes.fill(0);

test('a traceparent is version 00, the trace id, a 16-digit span id and flags 01', () => {
  const traceId = newTraceId();
  assert.match(traceId, /^[0-9a-f]{32}$/);
  const header = traceparentIn(traceId, (bytes) => bytes.set([0xff, 0xee, 0, 1, 2, 3, 4, 0x5a]));
  assert.equal(header, `00-${traceId}-ffee00010203045a-01`);
});

test('an all-zero draw still gives valid ids: the last bit is set', () => {
  assert.equal(newTraceId(zeros), `${'0'.repeat(31)}1`);
  const traceId = 'ab'.repeat(16);
  assert.equal(traceparentIn(traceId, zeros), `00-${traceId}-${'0'.repeat(15)}1-01`);
});

test('ids drawn from the platform differ draw to draw', () => {
  const traceIds = new Set(Array.from({ length: 1000 }, () => newTraceId()));
  assert.equal(traceIds.size, 1000);
  const spans = new Set(Array.from({ length: 1000 }, () => traceparentIn('ab'.repeat(16))));
  assert.equal(spans.size, 1000);
});

test('without crypto.getRandomValues the ids come from Math.random, still well formed', () => {
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'crypto');
  Object.defineProperty(globalThis, 'crypto', { value: undefined, configurable: true });
  try {
    assert.match(traceparentIn(newTraceId()), /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  } finally {
    Object.defineProperty(globalThis, 'crypto', descriptor ?? { value: undefined });
  }
});
