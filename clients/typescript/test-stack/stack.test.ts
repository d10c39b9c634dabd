/**
 * The package against the real stack: the edge Worker under workerd in front of the backend on
 * PostgreSQL, and the bank simulator, started by `edge/tests/typescript_client.rs`, which runs
 * this file with `node --test` and then audits the bank's ledger against the summary written
 * here. Every scenario runs through the edge and, where it does not need the edge, straight to
 * the backend too, each with a user of its own; the bank deduplicates nothing (`dedupe: false`),
 * so only the server stands between a retry and a second debit.
 *
 * Tried: a lost reply, then the retry held for the first attempt (`Prefer: wait`); a bank slower
 * than the attempt timeout (timeouts and 409s); the edge's 429; a decline; the deadline reached
 * with the outcome unsettled, then resumed; the process killed between saving and sending, then
 * resumed by a new process. Each counts debits at the bank's ledger.
 */

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import {
  type ActionResult,
  type ClientEvent,
  type FetchLike,
  FileStore,
  MemoryStore,
  PaymentsClient,
  type PaymentsClientOptions,
} from '../src/node.js';
import { setting, signToken } from '../dev/environment.js';

const edgeUrl = setting('PAYMENTS_EDGE_URL');
const backendUrl = setting('PAYMENTS_BACKEND_URL');
const bankUrl = setting('BANK_URL');
const summaryFile = setting('SUMMARY_FILE');

/** Every payment this file saw paid, for the ledger audit of the Rust side. */
const paid: { key: string; bank_reference: string }[] = [];

/** Users are numbered per scenario and route, so no two share a rate-limit bucket or key space. */
let nextUser = 100;

interface Phone {
  readonly client: PaymentsClient;
  readonly events: ClientEvent[];
  readonly sent: { key: string | undefined; body: string | undefined }[];
}

/** A client for a fresh user at `baseUrl`, recording its events and what each attempt sent. */
function phone(
  baseUrl: string,
  options: Partial<PaymentsClientOptions> = {},
  fetchThrough: (real: FetchLike) => FetchLike = (real) => real,
): Phone {
  const user = String(nextUser++);
  const events: ClientEvent[] = [];
  const sent: Phone['sent'] = [];
  const recording: FetchLike = (url, init) => {
    if (init.method === 'POST') {
      sent.push({ key: init.headers['Idempotency-Key'], body: init.body });
    }
    return fetch(url, init);
  };
  const client = new PaymentsClient({
    baseUrl,
    token: signToken(user),
    userId: user,
    store: new MemoryStore(),
    onEvent: (event) => events.push(event),
    ...options,
    fetch: fetchThrough(recording),
  });
  return { client, events, sent };
}

async function setBank(knobs: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${bankUrl}/knobs`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ dedupe: false, ...knobs }),
  });
  assert.equal(response.status, 200, 'the bank took its knobs');
}

async function debits(): Promise<number> {
  const ledger = (await (await fetch(`${bankUrl}/ledger`)).json()) as { debits: unknown[] };
  return ledger.debits.length;
}

/** Asserts the result is `paid`, notes it for the audit and returns it. */
function expectPaid(result: ActionResult): Extract<ActionResult, { kind: 'paid' }> {
  assert.equal(result.kind, 'paid', JSON.stringify(result));
  if (result.kind !== 'paid') throw new Error('unreachable');
  paid.push({ key: result.key, bank_reference: result.receipt.bank_reference });
  return result;
}

/** Every attempt of one action sent the same key and the same bytes. */
function sameKeyAndBytes(sent: Phone['sent'], key: string): void {
  assert.ok(sent.length > 0);
  for (const attempt of sent) {
    assert.equal(attempt.key, `"${key}"`);
    assert.equal(attempt.body, sent[0]?.body);
  }
}

const routes = [
  ['edge', edgeUrl],
  ['backend', backendUrl],
] as const;

for (const [route, baseUrl] of routes) {
  test(`${route}: a lost reply, then the retry held for the first attempt: one debit`, async () => {
    await setBank({ latency_ms: 1500 });
    const before = await debits();
    let first = true;
    // The first request goes out and runs to its end, but its reply never reaches the phone.
    const losingTheFirstReply = (real: FetchLike): FetchLike => (url, init) => {
      const sending = real(url, init);
      if (!first) return sending;
      first = false;
      sending.catch(() => undefined);
      return Promise.reject(new TypeError('the reply was lost'));
    };
    const { client, events, sent } = phone(baseUrl, {}, losingTheFirstReply);
    const result = expectPaid(await client.payBill(`elec-lost-${route}`, 230000, 'asha@okbank'));
    assert.equal(result.attempts, 2);
    assert.ok(result.waitedForFirstAttempt || result.replayed, JSON.stringify(result));
    sameKeyAndBytes(sent, result.key);
    assert.ok(events.some((event) => event.type === 'no_reply'));
    assert.equal((await debits()) - before, 1);
  });

  test(`${route}: a bank slower than the attempt timeout: timeouts and 409s, one debit`, async () => {
    await setBank({ latency_ms: 3500 });
    const before = await debits();
    const { client, events, sent } = phone(baseUrl, { rules: { attemptTimeoutMs: 2000 } });
    const result = expectPaid(await client.payBill(`elec-slow-${route}`, 120000, 'ravi@okbank'));
    sameKeyAndBytes(sent, result.key);
    assert.ok(result.attempts >= 2, JSON.stringify(result));
    assert.ok(events.some((event) => event.type === 'no_reply'), 'the first attempt timed out');
    assert.equal((await debits()) - before, 1);
  });

  test(`${route}: a decline is typed, final, and moves no money`, async () => {
    await setBank({ decline_rate: 1.0 });
    const before = await debits();
    const { client } = phone(baseUrl);
    const result = await client.payBill(`elec-decline-${route}`, 99900, 'asha@okbank');
    assert.equal(result.kind, 'declined', JSON.stringify(result));
    assert.equal(result.kind === 'declined' && result.status, 402);
    assert.ok(result.kind === 'declined' && result.problem?.type, 'the problem has its type');
    assert.deepEqual(await client.pending(), []);
    assert.equal(await debits(), before);
  });

  test(`${route}: the deadline reached with the outcome unsettled, then resumed: one debit`, async () => {
    // Slower than the phone's deadline, faster than the backend's own bank timeout (5 s), so
    // the first attempt is still running when the phone gives up and then ends by itself.
    await setBank({ latency_ms: 3500 });
    const before = await debits();
    const { client } = phone(baseUrl, { rules: { attemptTimeoutMs: 1000, deadlineMs: 2500 } });
    const first = await client.payBill(`elec-deadline-${route}`, 45000, 'asha@okbank');
    // At the deadline the key is looked up, never paid again: still running (kept), or, on a
    // machine slow enough that a look-up outlives the bank call, already done.
    const lookedUp =
      (first.kind === 'pending' && first.why === 'started') ||
      (first.kind === 'paid' && first.fromStatusLookUp);
    assert.ok(lookedUp, JSON.stringify(first));
    if (first.kind === 'pending') {
      assert.equal((await client.pending()).length, 1, 'the action is kept');
    }
    // After the bank has replied, a resume past the deadline looks the key up: never a new send.
    let resumed: ActionResult = first;
    for (let round = 0; round < 30 && resumed.kind === 'pending'; round++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      [resumed = first] = await client.resumeAll();
    }
    const result = expectPaid(resumed);
    assert.equal(result.key, first.key);
    assert.ok(result.fromStatusLookUp, JSON.stringify(result));
    assert.deepEqual(await client.pending(), []);
    assert.equal((await debits()) - before, 1);
  });

  test(`${route}: killed between saving and sending, resumed by a new process: one debit`, async () => {
    await setBank({});
    const before = await debits();
    const dir = mkdtempSync(join(tmpdir(), 'payments-client-'));
    const user = String(nextUser++);
    const killed = spawnSync(process.execPath, [join(import.meta.dirname, 'payThenDie.js')], {
      env: { ...process.env, STORE_DIR: dir, PAY_USER: user, PAY_URL: baseUrl },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(killed.status, 9, `killed at its first send: ${killed.stderr}`);
    const store = new FileStore(dir);
    const [saved] = await store.list();
    assert.ok(saved, 'the action was saved before the send');
    assert.equal(await debits(), before, 'nothing was sent');

    const client = new PaymentsClient({ baseUrl, token: signToken(user), userId: user, store });
    const results = await client.resumeAll();
    assert.equal(results.length, 1);
    const result = expectPaid(results[0] as ActionResult);
    assert.equal(result.key, saved.key);
    assert.deepEqual(await store.list(), []);
    assert.equal((await debits()) - before, 1);
  });
}

test('edge: over the rate limit, a 429 is retried after its Retry-After: one debit each', async () => {
  await setBank({});
  const before = await debits();
  const { client, events } = phone(edgeUrl);
  const results = [];
  for (let bill = 0; bill < 4; bill++) {
    results.push(await client.payBill(`elec-limit-${bill}`, 1000 + bill, 'asha@okbank'));
  }
  results.forEach(expectPaid);
  assert.ok(
    events.some((event) => event.type === 'replied' && event.status === 429),
    'the burst of two was exceeded',
  );
  assert.ok(events.some((event) => event.type === 'waiting' && event.retryAfterMs !== null));
  assert.equal((await debits()) - before, 4);
});

test('the summary for the ledger audit', () => {
  writeFileSync(summaryFile, JSON.stringify({ paid }));
  assert.ok(paid.length >= 12);
});
