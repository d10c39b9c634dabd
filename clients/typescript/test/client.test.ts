/**
 * The client end to end against a scripted `fetch` and a fake clock (no real waiting, except
 * one test of the real attempt timeout): every attempt carries the same key and the identical
 * body bytes, waits follow the rules, final replies are typed, and the store keeps exactly the
 * actions whose outcome is not known to be final.
 */

import assert from 'node:assert/strict';
import { type IncomingMessage, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';

import {
  type ActionResult,
  type ActionStore,
  type ClientEvent,
  type FetchLike,
  InvalidRequestError,
  MemoryStore,
  PaymentsClient,
  type PaymentsClientOptions,
  SaveFailedError,
  type SavedAction,
} from '../src/index.js';
import { FakeClock, type Recorded, ScriptedFetch, type Step } from './support/fakes.js';

const PAY_BODY = '{"amount_paise":230000,"payer_vpa":"asha@okbank"}';
const PAYMENT = {
  payment_id: '4b0d3a52-8f3e-4bb4-9a53-1f0e2b9f6c11',
  bill_id: 'elec-1',
  amount_paise: 230000,
  status: 'succeeded',
  bank_reference: 'pay-4b0d3a52-8f3e-4bb4-9a53-1f0e2b9f6c11',
};
const DECLINE = {
  type: '/problems/payment-declined',
  title: 'Payment declined',
  status: 402,
  detail: 'The bank declined the debit.',
};
const MINUTE = 60_000;
const USER_AGENT = 'payments-client/0.1.0 (TypeScript)';
/** Version 00, a 32-digit trace id, a 16-digit span id, flags 01: lower-case hex. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;
/** Lower-case 8-4-4-4-12 hex, version 4, variant `10xx` (8, 9, a or b). */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const created: Step = { status: 201, body: JSON.stringify(PAYMENT) };
const lost: Step = { fail: 'timeout', takesMs: 15_000 };

function keyStatus(state: string, extra: Record<string, unknown> = {}): Step {
  const body = { state, operation: 'pay_bill', expires_at: '2026-12-05T10:00:00Z', ...extra };
  return { status: 200, body: JSON.stringify(body) };
}

/** A request's headers without its `traceparent` (a new span each request), and its trace. */
function traced(request: Recorded | undefined) {
  const { traceparent, ...headers } = request?.headers ?? {};
  const [, traceId, spanId] = TRACEPARENT.exec(traceparent ?? '') ?? [];
  assert.ok(traceId !== undefined && spanId !== undefined, `traceparent ${traceparent}`);
  assert.notEqual(traceId, '0'.repeat(32));
  assert.notEqual(spanId, '0'.repeat(16));
  return { headers, traceId, spanId };
}

/** A client for user 7 on a fake clock, replying from `sends` and `lookUps`. */
function rig(sends: Step[], lookUps: Step[] = [], options: Partial<PaymentsClientOptions> = {}) {
  const clock = new FakeClock();
  const server = new ScriptedFetch(clock, sends, lookUps);
  const store = new MemoryStore();
  const events: ClientEvent[] = [];
  const client = new PaymentsClient({
    baseUrl: 'https://pay.example/',
    token: 'token-7',
    userId: '7',
    store,
    fetch: server.fetch,
    clock,
    random: () => 0.5,
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { clock, server, store, events, client };
}

function assertKind<K extends ActionResult['kind']>(
  result: ActionResult,
  kind: K,
): asserts result is Extract<ActionResult, { kind: K }> {
  assert.equal(result.kind, kind, JSON.stringify(result));
}

test('replies lost, then the replay: every attempt sends the same key and the identical body bytes', async () => {
  const { client, server, store, clock } = rig([
    lost,
    { fail: 'network' },
    { ...created, headers: { 'Idempotent-Replayed': 'true' } },
  ]);
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'paid');
  assert.deepEqual(result.receipt, PAYMENT);
  assert.equal(result.replayed, true);
  assert.equal(result.attempts, 3);
  assert.equal(server.posts.length, 3);
  for (const request of server.posts) {
    assert.equal(request.url, 'https://pay.example/v1/bills/elec-1/pay');
    assert.equal(request.body, PAY_BODY);
    assert.deepEqual(traced(request).headers, {
      Authorization: 'Bearer token-7',
      'Idempotency-Key': `"${result.key}"`,
      'Content-Type': 'application/json',
      Prefer: 'wait=10',
      'User-Agent': USER_AGENT,
    });
  }
  assert.match(result.key, UUID_V4);
  // Half of the 0.5 s and 1 s ceilings.
  assert.deepEqual(clock.sleeps, [250, 500]);
  assert.deepEqual(await store.list(), [], 'a final reply removes the action');
});

test('a 409 with Retry-After is retried after the Retry-After, a floor under the jitter', async () => {
  const inProgress: Step = {
    status: 409,
    headers: { 'Retry-After': '1', 'Preference-Applied': 'wait=10' },
    body: '{"type":"/problems/request-in-progress","title":"In progress","status":409}',
  };
  const { client, server, clock, events } = rig([inProgress, created], [], { random: () => 0.1 });
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'paid');
  assert.deepEqual(clock.sleeps, [1000]);
  assert.deepEqual(
    new Set(server.posts.map((request) => request.headers['Idempotency-Key'])).size,
    1,
  );
  assert.ok(
    events.some(
      (event) => event.type === 'replied' && event.status === 409 && event.waitedSeconds === 10,
    ),
  );
  assert.ok(
    events.some(
      (event) => event.type === 'waiting' && event.ms === 1000 && event.retryAfterMs === 1000,
    ),
  );
});

test('a 429 is retried with the same key and body after its Retry-After', async () => {
  const { client, server, clock } = rig([
    { status: 429, headers: { 'Retry-After': '3' } },
    created,
  ]);
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'paid');
  assert.deepEqual(clock.sleeps, [3000]);
  assert.equal(server.posts.length, 2);
  const [first, second] = server.posts.map((request) => ({
    ...request,
    atMs: 0,
    headers: traced(request).headers,
  }));
  assert.deepEqual(first, second, 'the same request but for its time and span');
});

test('a 402 is a decline, typed with its problem, and ends the action', async () => {
  const { client, store } = rig([{ status: 402, body: JSON.stringify(DECLINE) }]);
  const result = await client.payBill('elec-1', 230_000, 'decline@okbank');

  assertKind(result, 'declined');
  assert.deepEqual(result.problem, DECLINE);
  assert.equal(result.fromStatusLookUp, false);
  assert.deepEqual(await store.list(), []);
});

test('a 422 is refused with its problem type and ends the action', async () => {
  const problem = {
    type: '/problems/invalid-field',
    title: 'Invalid field',
    status: 422,
    field: 'payer_vpa',
  };
  const { client, store, server } = rig([{ status: 422, body: JSON.stringify(problem) }]);
  const result = await client.payBill('elec-1', 230_000, 'not a vpa');

  assertKind(result, 'refused');
  assert.equal(result.status, 422);
  assert.equal(result.problem?.type, '/problems/invalid-field');
  assert.equal(result.problem?.['field'], 'payer_vpa');
  assert.equal(server.posts.length, 1, 'a final reply is not retried');
  assert.deepEqual(await store.list(), []);
});

test('a pending result says when the server expects to know: the next check or the settlement', async () => {
  const at = '2026-12-06T10:01:30Z';
  for (const [member, kind] of [
    ['next_check_at', 'next_status_check'],
    ['settlement_due_at', 'settlement'],
  ] as const) {
    const { client } = rig([lost], [keyStatus('unknown', { [member]: at })]);
    const result = await client.payBill('elec-1', 230_000, 'asha@okbank');
    assertKind(result, 'pending');
    assert.equal(result.why, 'unknown');
    assert.deepEqual(result.knownBy, { kind, at });
  }
});

test('at the deadline the key is looked up instead of paid again; unknown keeps the action', async () => {
  const { client, server, store, events } = rig([lost], [keyStatus('unknown')]);
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'pending');
  assert.equal(result.why, 'unknown');
  assert.equal(result.knownBy, null, 'this status names no time');
  const [saved] = await store.list();
  assert.equal(saved?.key, result.key, 'the action stays saved for a later resume');
  const startedAt = saved.startedAtMs;
  assert.ok(server.posts.length > 10);
  assert.ok(
    server.posts.every((request) => request.atMs - startedAt < 10 * MINUTE),
    'no attempt at or after the deadline',
  );
  assert.equal(server.gets.length, 1);
  assert.deepEqual(server.gets[0]?.url, `https://pay.example/v1/idempotency-keys/${result.key}`);
  assert.deepEqual(traced(server.gets[0]).headers, {
    Authorization: 'Bearer token-7',
    Prefer: 'wait=10',
    'User-Agent': USER_AGENT,
  });
  assert.ok(
    events.some(
      (event) => event.type === 'stopped_sending' && event.attempts === server.posts.length,
    ),
  );
  assert.deepEqual(events[events.length - 1], {
    type: 'stopped',
    key: result.key,
    result: 'pending',
    keptAction: true,
  });
});

test('a look-up 404 means never received: nothing charged, the action removed', async () => {
  const { client, store } = rig([{ fail: 'network' }, lost], [{ status: 404 }]);
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'not_received');
  assert.deepEqual(await store.list(), []);
});

test("a look-up's done key gives the saved reply and ends the action", async () => {
  const { client, store } = rig([lost], [keyStatus('done', { status: 201, reply: PAYMENT })]);
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'paid');
  assert.deepEqual(result.receipt, PAYMENT);
  assert.equal(result.fromStatusLookUp, true);
  assert.equal(result.replayed, true);
  assert.deepEqual(await store.list(), []);
});

test('killed after the save and before the send: a new client resumes with the same key and body', async () => {
  const store = new MemoryStore();
  const first = rig([created], [], { store, token: () => new Promise<string>(() => undefined) });
  void first.client.payBill('elec-1', 230_000, 'asha@okbank'); // Never gets past its token.
  await new Promise((resolve) => setImmediate(resolve));
  const [saved] = await store.list();
  assert.ok(saved !== undefined, 'saved before anything was sent');
  assert.equal(first.server.requests.length, 0);

  const restarted = rig([created], [], { store });
  assert.deepEqual(await restarted.client.pending(), [saved]);
  const results = await restarted.client.resumeAll();

  assert.equal(results.length, 1);
  assertKind(results[0] as ActionResult, 'paid');
  assert.equal(restarted.server.posts.length, 1);
  assert.equal(restarted.server.posts[0]?.headers['Idempotency-Key'], `"${saved.key}"`);
  assert.equal(restarted.server.posts[0]?.body, saved.body);
  assert.equal(saved.body, PAY_BODY);
  assert.deepEqual(await store.list(), []);
  assert.equal(restarted.events[0]?.type, 'resuming');
});

test('when saving fails, nothing is sent', async () => {
  const failing: ActionStore = {
    save: async () => {
      throw new Error('disk full');
    },
    list: async () => [],
    remove: async () => undefined,
  };
  const { client, server } = rig([created], [], { store: failing });

  await assert.rejects(client.payBill('elec-1', 230_000, 'asha@okbank'), (error: unknown) => {
    assert.ok(error instanceof SaveFailedError);
    assert.match(error.message, /disk full/);
    return true;
  });
  assert.equal(server.requests.length, 0);
});

test('an amount that is not whole paise from 1 to 1,000,000,000 is refused before anything is saved', async () => {
  const { client, server, store } = rig([created]);
  for (const amount of [0, -1, 1.5, 1_000_000_001, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
    await assert.rejects(
      client.payBill('elec-1', amount, 'asha@okbank'),
      InvalidRequestError,
      String(amount),
    );
    await assert.rejects(client.refund('pay-1', amount), InvalidRequestError, String(amount));
  }
  assert.deepEqual(await store.list(), []);
  assert.equal(server.requests.length, 0);
  assertKind(await client.payBill('elec-1', 1_000_000_000, 'asha@okbank'), 'paid');
});

test('a refund sends its own path and body and returns the refund', async () => {
  const refund = {
    refund_id: 'r-1',
    payment_id: 'pay-1',
    amount_paise: 50_000,
    status: 'succeeded',
    bank_reference: 'refund-r-1',
  };
  const { client, server } = rig([{ status: 201, body: JSON.stringify(refund) }]);
  const result = await client.refund('pay-1', 50_000);

  assertKind(result, 'paid');
  assert.deepEqual(result.receipt, refund);
  assert.equal(server.posts[0]?.url, 'https://pay.example/v1/payments/pay-1/refunds');
  assert.equal(server.posts[0]?.body, '{"amount_paise":50000}');
});

test('a refused token keeps the action; after signing in it is resumed with the same key', async () => {
  const store = new MemoryStore();
  const before = rig([{ status: 503 }, { status: 401 }], [], { store });
  const result = await before.client.payBill('elec-1', 230_000, 'asha@okbank');
  assertKind(result, 'sign_in_required');
  const [saved] = await store.list();
  assert.equal(saved?.key, result.key);

  const after = rig([created], [], { store, token: async () => 'fresh-token' });
  assertKind(await after.client.resume(saved), 'paid');
  assert.equal(after.server.posts[0]?.headers['Idempotency-Key'], `"${result.key}"`);
  assert.equal(after.server.posts[0]?.headers['Authorization'], 'Bearer fresh-token');
});

test('a resumed action past its deadline is only looked up, never sent', async () => {
  const store = new MemoryStore();
  const { client, server, clock } = rig(
    [created],
    [keyStatus('done', { status: 402, reply: DECLINE })],
    { store },
  );
  const late: SavedAction = {
    version: 1,
    key: '0f8e5c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b',
    userId: '7',
    operation: 'pay_bill',
    target: 'elec-1',
    path: '/v1/bills/elec-1/pay',
    body: PAY_BODY,
    startedAtMs: clock.now - 11 * MINUTE,
  };
  await store.save(late);
  const result = await client.resume(late);

  assertKind(result, 'declined');
  assert.equal(result.fromStatusLookUp, true);
  assert.equal(result.attempts, 0);
  assert.equal(server.posts.length, 0);
  assert.deepEqual(await store.list(), []);
});

test("resuming another user's action is refused", async () => {
  const { client, server } = rig([created]);
  const foreign = {
    version: 1,
    key: 'k-1',
    userId: '8',
    operation: 'pay_bill',
    target: 'elec-1',
    path: '/v1/bills/elec-1/pay',
    body: PAY_BODY,
    startedAtMs: 0,
  } as const;
  await assert.rejects(client.resume(foreign), InvalidRequestError);
  assert.equal(server.requests.length, 0);
});

test('a request that outlives the attempt timeout is aborted and counts as no reply', async () => {
  const signals: AbortSignal[] = [];
  let calls = 0;
  const fetch: FetchLike = (_url, init) => {
    signals.push(init.signal);
    calls += 1;
    if (calls === 1) {
      return new Promise((_, reject) =>
        init.signal.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    }
    return Promise.resolve({
      status: 201,
      headers: { get: () => null },
      text: async () => JSON.stringify(PAYMENT),
    });
  };
  const { client, events } = rig([], [], { fetch, rules: { attemptTimeoutMs: 30 } });
  const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assertKind(result, 'paid');
  assert.equal(signals[0]?.aborted, true);
  assert.equal(signals[1]?.aborted, false);
  assert.ok(
    events.some(
      (event) => event.type === 'no_reply' && event.reason === 'no reply within 0.03 s',
    ),
  );
  assert.ok(
    events.some((event) => event.type === 'sending' && event.preferWaitSeconds === null),
    'no room to wait',
  );
});

test('two taps are two actions with two keys, and the events tell each run', async () => {
  const { client, events } = rig([created]);
  const first = await client.payBill('elec-1', 230_000, 'asha@okbank');
  const second = await client.payBill('elec-1', 230_000, 'asha@okbank');

  assert.notEqual(first.key, second.key);
  assert.deepEqual(
    events.filter((event) => event.key === first.key).map((event) => event.type),
    ['sending', 'replied', 'stopped'],
  );
});

test("over real HTTP with the platform's fetch: the headers and the body bytes on the wire", async () => {
  const received: {
    method: string | undefined;
    url: string | undefined;
    headers: IncomingMessage['headers'];
    body: string;
  }[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      received.push({ method: request.method, url: request.url, headers: request.headers, body });
      if (received.length === 1) {
        response.writeHead(503, { 'Retry-After': '0', 'Content-Type': 'application/problem+json' });
        response.end('{"type":"/problems/outcome-pending","title":"Outcome pending","status":503}');
      } else {
        response.writeHead(201, {
          'Content-Type': 'application/json',
          'Idempotent-Replayed': 'true',
        });
        response.end(JSON.stringify(PAYMENT));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const client = new PaymentsClient({
      baseUrl: `http://127.0.0.1:${port}`,
      token: 'token-7',
      userId: '7',
      store: new MemoryStore(),
      // Real time: the attempt's timeout runs on the clock, and real HTTP takes real time.
      // The waits are zero (the jitter's unit 0, `Retry-After: 0`).
      random: () => 0,
    });
    const result = await client.payBill('elec-1', 230_000, 'asha@okbank');

    assertKind(result, 'paid');
    assert.equal(result.replayed, true);
    assert.equal(received.length, 2);
    for (const request of received) {
      assert.equal(request.method, 'POST');
      assert.equal(request.url, '/v1/bills/elec-1/pay');
      assert.equal(request.body, PAY_BODY);
      assert.equal(request.headers['authorization'], 'Bearer token-7');
      assert.equal(request.headers['idempotency-key'], `"${result.key}"`);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.equal(request.headers['prefer'], 'wait=10');
      assert.equal(request.headers['user-agent'], USER_AGENT);
      assert.match(String(request.headers['traceparent']), TRACEPARENT);
    }
    const [first, second] = received.map((request) => String(request.headers['traceparent']));
    assert.equal(first?.slice(0, 36), second?.slice(0, 36), 'one trace id for the action');
    assert.notEqual(first?.slice(36), second?.slice(36), 'a new span id for each attempt');
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('every request names the client and carries a traceparent: one trace per action, look-ups included, a new span each', async () => {
  const { client, server } = rig([lost], [keyStatus('unknown')]);
  const first = await client.payBill('elec-1', 230_000, 'asha@okbank');
  const second = await client.payBill('elec-2', 230_000, 'asha@okbank');
  assertKind(first, 'pending');
  assertKind(second, 'pending');

  /** The requests of the action with `key`, attempts and look-up, read for their trace. */
  const requestsOf = (key: string) => {
    const requests = server.requests.filter(
      (request) =>
        request.headers['Idempotency-Key'] === `"${key}"` ||
        request.url.endsWith(`/v1/idempotency-keys/${key}`),
    );
    assert.ok(requests.length > 10, 'many attempts');
    assert.equal(requests.filter((request) => request.method === 'GET').length, 1);
    return requests.map(traced);
  };
  const [ofFirst, ofSecond] = [requestsOf(first.key), requestsOf(second.key)];
  const all = [...ofFirst, ...ofSecond];
  assert.equal(all.length, server.requests.length);
  assert.ok(all.every(({ headers }) => headers['User-Agent'] === USER_AGENT));
  for (const requests of [ofFirst, ofSecond]) {
    assert.equal(new Set(requests.map(({ traceId }) => traceId)).size, 1, 'one trace an action');
  }
  assert.notEqual(ofFirst[0]?.traceId, ofSecond[0]?.traceId, 'a new action, a new trace');
  assert.equal(new Set(all.map(({ spanId }) => spanId)).size, all.length, 'a span a request');
});

test('an injected mintKey makes the keys: saved, and sent on every attempt', async () => {
  const minted = ['key-from-the-app-1', 'key-from-the-app-2'];
  const { client, server } = rig([{ fail: 'network' }, created], [], {
    mintKey: () => minted.shift() ?? 'none left',
  });
  const first = await client.payBill('elec-1', 230_000, 'asha@okbank');
  const second = await client.refund('pay-1', 50_000);

  assert.equal(first.key, 'key-from-the-app-1');
  assert.equal(second.key, 'key-from-the-app-2');
  assert.deepEqual(
    server.posts.map((request) => request.headers['Idempotency-Key']),
    ['"key-from-the-app-1"', '"key-from-the-app-1"', '"key-from-the-app-2"'],
  );
});

test('an injected mintKey that gives an empty key is refused before anything is saved', async () => {
  const { client, server, store } = rig([created], [], { mintKey: () => '' });
  await assert.rejects(client.payBill('elec-1', 230_000, 'asha@okbank'), /options\.mintKey/);
  assert.deepEqual(await store.list(), []);
  assert.equal(server.requests.length, 0);
});

/** Runs `body` with the platform's `crypto.randomUUID` (and `getRandomValues`, if asked) hidden. */
async function withoutCrypto(
  hide: ('randomUUID' | 'getRandomValues')[],
  body: () => Promise<void>,
): Promise<void> {
  const crypto = globalThis.crypto;
  for (const name of hide) {
    Object.defineProperty(crypto, name, { value: undefined, configurable: true });
  }
  try {
    assert.equal(crypto.randomUUID, undefined);
    await body();
  } finally {
    for (const name of hide) {
      delete (crypto as unknown as Record<string, unknown>)[name];
    }
  }
  assert.equal(typeof crypto.randomUUID, 'function', 'the platform is restored');
}

test('without crypto.randomUUID (Hermes) the client mints version 4 keys from getRandomValues', async () => {
  await withoutCrypto(['randomUUID'], async () => {
    const { client, server } = rig([created]);
    const keys = new Set<string>();
    for (let tap = 0; tap < 200; tap += 1) {
      const result = await client.payBill('elec-1', 230_000, 'asha@okbank');
      assert.match(result.key, UUID_V4);
      keys.add(result.key);
    }
    assert.equal(keys.size, 200);
    assert.equal(server.posts.length, 200);
  });
});

test('with neither randomUUID nor getRandomValues, paying fails saying what to do, nothing saved or sent', async () => {
  await withoutCrypto(['randomUUID', 'getRandomValues'], async () => {
    const { client, server, store } = rig([created]);
    await assert.rejects(
      client.payBill('elec-1', 230_000, 'asha@okbank'),
      /react-native-get-random-values.*options\.mintKey/,
    );
    assert.deepEqual(await store.list(), []);
    assert.equal(server.requests.length, 0);
  });
});
