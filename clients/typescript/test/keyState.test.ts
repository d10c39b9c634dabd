/**
 * The key status body (`GET /v1/idempotency-keys/{key}`), read with `JSON.parse` and plain
 * checks: what the server sends is read, and what is not a key status tells nothing (`null`).
 * Where this reader differs from the Rust one (serde) on bodies the server never sends, the
 * difference is pinned here as documented in `src/keyState.ts`.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { keyStateFromBody, readKeyStatus } from '../src/index.js';

const EXPIRES = '"expires_at":"2026-12-03T10:00:00Z"';

function body(members: string): string {
  return `{${members}}`;
}

test('the four states are read, and a done key needs its status and reply', () => {
  assert.deepEqual(keyStateFromBody(body(`"state":"started","operation":"pay_bill",${EXPIRES}`)), {
    state: 'started',
  });
  assert.deepEqual(
    keyStateFromBody(body(`"state":"unknown","operation":"refund_payment",${EXPIRES}`)),
    { state: 'unknown' },
  );
  assert.deepEqual(
    keyStateFromBody(
      body(`"state":"released","operation":"pay_bill","status":null,"reply":null,${EXPIRES}`),
    ),
    { state: 'released' },
  );
  assert.deepEqual(
    keyStateFromBody(
      body(`"state":"done","operation":"pay_bill","status":402,"reply":{"status":402},${EXPIRES}`),
    ),
    { state: 'done', status: 402 },
  );
  for (const members of [
    `"state":"done","operation":"pay_bill",${EXPIRES}`,
    `"state":"done","operation":"pay_bill","status":201,${EXPIRES}`,
    `"state":"done","operation":"pay_bill","reply":{},${EXPIRES}`,
    `"state":"done","operation":"pay_bill","status":201,"reply":null,${EXPIRES}`,
    `"state":"done","operation":"pay_bill","status":null,"reply":{},${EXPIRES}`,
    `"state":"gone","operation":"pay_bill",${EXPIRES}`,
    `"state":"Started","operation":"pay_bill",${EXPIRES}`,
    `"state":5,"operation":"pay_bill",${EXPIRES}`,
    `"operation":"pay_bill",${EXPIRES}`,
    `"state":"started",${EXPIRES}`,
    `"state":"started","operation":"PAY_BILL",${EXPIRES}`,
    `"state":"started","operation":"pay_bill"`,
    `"state":"started","operation":"pay_bill","expires_at":1796292000`,
  ]) {
    assert.equal(keyStateFromBody(body(members)), null, members);
  }
});

test("a done key's reply is kept as parsed, with the operation and expiry", () => {
  const reply = { type: '/problems/payment-declined', title: 'Declined', status: 402 };
  const status = readKeyStatus(
    `{"state":"done","operation":"pay_bill","status":402,"reply": ${JSON.stringify(reply)} ,${EXPIRES}}`,
  );
  assert.deepEqual(status, {
    keyState: { state: 'done', status: 402 },
    operation: 'pay_bill',
    expiresAt: '2026-12-03T10:00:00Z',
    reply,
    nextCheckAt: null,
    settlementDueAt: null,
  });
  assert.equal(
    readKeyStatus(body(`"state":"unknown","operation":"pay_bill","reply":{},${EXPIRES}`))?.reply,
    null,
  );
});

test('a body from a server of the previous version, with only the deprecated answer, is read alike', () => {
  const reply = { payment_id: 'pay-1', status: 'succeeded' };
  const old = readKeyStatus(
    body(`"state":"done","operation":"pay_bill","status":201,"answer":${JSON.stringify(reply)},${EXPIRES}`),
  );
  assert.deepEqual(old?.keyState, { state: 'done', status: 201 });
  assert.deepEqual(old?.reply, reply);
  // Both sent (as servers now do): `reply` is the one read.
  const both = readKeyStatus(
    body(`"state":"done","operation":"pay_bill","status":201,"reply":${JSON.stringify(reply)},"answer":{},${EXPIRES}`),
  );
  assert.deepEqual(both?.reply, reply);
  assert.equal(
    readKeyStatus(body(`"state":"done","operation":"pay_bill","status":201,"answer":null,${EXPIRES}`)),
    null,
  );
});

test('an unknown key says when the bank is asked next, or when settlement is due', () => {
  const next = readKeyStatus(
    body(`"state":"unknown","operation":"pay_bill","next_check_at":"2026-12-01T10:01:30Z",${EXPIRES}`),
  );
  assert.equal(next?.nextCheckAt, '2026-12-01T10:01:30Z');
  assert.equal(next?.settlementDueAt, null);
  const settling = readKeyStatus(
    body(`"state":"unknown","operation":"pay_bill","settlement_due_at":"2026-12-01T18:30:00Z",${EXPIRES}`),
  );
  assert.equal(settling?.settlementDueAt, '2026-12-01T18:30:00Z');
  const malformed = readKeyStatus(
    body(`"state":"unknown","operation":"pay_bill","next_check_at":"soon",${EXPIRES}`),
  );
  assert.equal(malformed?.nextCheckAt, null, 'a malformed time is ignored, not trusted');
});

test('white space, escapes and other members are allowed', () => {
  for (const text of [
    ` \n\t{ "state" : "started" , "operation" : "pay_bill" , ${EXPIRES} } \r\n`,
    body(`"st\\u0061te":"st\\u0061rted","operation":"pay_bill",${EXPIRES}`),
    body(`"state":"started","operation":"pay_bill",${EXPIRES},"extra":{"deep":[1,-0.5e-3,true]}`),
  ]) {
    assert.deepEqual(keyStateFromBody(text), { state: 'started' }, text);
  }
});

test('what is not a JSON object is not a key status', () => {
  for (const text of [
    `${body(`"state":"started","operation":"pay_bill",${EXPIRES}`)}x`,
    `\ufeff${body(`"state":"started","operation":"pay_bill",${EXPIRES}`)}`,
    body(`"state":"started","operation":"pay_bill",${EXPIRES},`),
    'null',
    '"started"',
    '[]',
    '<html>captive portal</html>',
    '',
  ]) {
    assert.equal(keyStateFromBody(text), null, text);
  }
});

test("a done key's status is an integer from 100 to 599", () => {
  const done = (status: string) =>
    keyStateFromBody(
      body(`"state":"done","operation":"pay_bill","status":${status},"reply":{},${EXPIRES}`),
    );
  assert.deepEqual(done('100'), { state: 'done', status: 100 });
  assert.deepEqual(done('599'), { state: 'done', status: 599 });
  assert.deepEqual(done('201'), { state: 'done', status: 201 });
  for (const status of ['99', '600', '0', '65535', '201.5', '-201', '"201"', 'true']) {
    assert.equal(done(status), null, status);
  }
});

test('expires_at is an RFC 3339 date-time', () => {
  const expiring = (at: string) =>
    keyStateFromBody(
      body(`"state":"started","operation":"pay_bill","expires_at":${JSON.stringify(at)}`),
    );
  for (const at of [
    '2026-12-03T10:00:00Z',
    '2026-12-03t10:00:00z',
    '2026-12-03 10:00:00Z',
    '2026-12-03T10:00:00.123456789+05:30',
    '2026-12-03T10:00:00-23:59',
    '2016-12-31T23:59:60Z',
  ]) {
    assert.deepEqual(expiring(at), { state: 'started' }, at);
  }
  for (const at of [
    '2026-12-03T10:00:00',
    '2026-12-03',
    '2026-12-03T10:00:00.Z',
    '2026-13-03T10:00:00Z',
    '2026-12-00T10:00:00Z',
    '2026-12-32T10:00:00Z',
    '2026-12-03T24:00:00Z',
    '2026-12-03T10:60:00Z',
    '2026-12-03T10:00:61Z',
    '2026-12-03T10:00:00+24:00',
    '2026-12-03T10:00:00+05:60',
    '2026-12-03T10:00:00+0530',
    '2026-12-03x10:00:00Z',
    '26-12-03T10:00:00Z',
    ' 2026-12-03T10:00:00Z',
    '2026-12-03T10:00:00Z ',
  ]) {
    assert.equal(expiring(at), null, at);
  }
});

test('documented differences from serde: duplicates keep the last, no array form', () => {
  // serde refuses a member given twice; JSON.parse keeps the last one.
  assert.deepEqual(
    keyStateFromBody(body(`"state":"done","state":"started","operation":"pay_bill",${EXPIRES}`)),
    { state: 'started' },
  );
  // serde reads a struct from an array of its fields in order; this reader does not.
  assert.equal(keyStateFromBody('["done","pay_bill",201,{"a":1},"2026-12-03T10:00:00Z"]'), null);
  // Nor serde's map form of a unit variant.
  assert.equal(
    keyStateFromBody(body(`"state":"started","operation":{"pay_bill":null},${EXPIRES}`)),
    null,
  );
});
