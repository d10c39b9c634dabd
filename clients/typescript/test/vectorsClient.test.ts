/**
 * The shared test vectors run through the client's real loop ({@link PaymentsClient.resume}),
 * as the Rust client runs them (`client/src/vector_tests.rs`): each case's replies are played
 * by a `fetch` that also moves the clock to the case's time, the jitter draws the case's units,
 * and the moves the loop makes (its waits, its `Prefer` header, send or look-up, how it ends and
 * whether the action stays saved) must be the vectors' moves.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  type ActionResult,
  type ClientEvent,
  type FetchLike,
  MemoryStore,
  PaymentsClient,
  type SavedAction,
} from '../src/index.js';
import { FakeClock } from './support/fakes.js';
import { type VectorMove, type VectorStop, rulesOf, vectors } from './support/vectors.js';

type RequestMove = Exclude<VectorMove, { stop: VectorStop }>;

for (const vector of vectors.cases ?? []) {
  test(`vector through the client: ${vector.name}`, async () => {
    const clock = new FakeClock();
    const started = clock.now - vector.starts_at_ms;
    const store = new MemoryStore();
    const saved: SavedAction = {
      version: 1,
      key: '9c5b94b1-35ad-49bb-b118-8e8fc3c4a7e6',
      userId: '7',
      operation: 'pay_bill',
      target: 'elec-1',
      path: '/v1/bills/elec-1/pay',
      body: '{"amount_paise":230000,"payer_vpa":"asha@okbank"}',
      startedAtMs: started,
    };
    await store.save(saved);
    const replies = [...vector.steps];
    const units = vector.steps.map((step) => step.unit);
    const requests: { kind: 'send' | 'look_up'; headers: Record<string, string> }[] = [];
    const fetch: FetchLike = async (_url, init) => {
      const { Prefer } = init.headers;
      requests.push({
        kind: init.method === 'POST' ? 'send' : 'look_up',
        headers: Prefer === undefined ? {} : { Prefer },
      });
      const step = replies.shift();
      assert.ok(step !== undefined, 'the loop made no more requests than the case has replies');
      clock.now = started + step.at_ms;
      if ('no_reply' in step.seen) {
        throw new TypeError("the vector's reply was lost");
      }
      const { status, retry_after: retryAfter, body } = step.seen;
      return {
        status,
        headers: {
          get: (name) => (name.toLowerCase() === 'retry-after' ? (retryAfter ?? null) : null),
        },
        text: async () => body ?? '',
      };
    };
    const events: ClientEvent[] = [];
    const client = new PaymentsClient({
      baseUrl: 'https://pay.example',
      token: 'token-7',
      userId: '7',
      store,
      rules: rulesOf(vector.rules),
      fetch,
      clock,
      random: () => {
        const unit = units.shift();
        assert.ok(unit !== undefined, 'a unit per reply');
        return unit;
      },
      onEvent: (event) => events.push(event),
    });
    const result = await client.resume(saved);

    const expected = [vector.first, ...vector.steps.map((step) => step.next)];
    const stop = expected.pop();
    assert.ok(stop !== undefined && 'stop' in stop, 'a case ends in a stop');
    const made = movesMade(events, requests);
    assert.equal(made.length, expected.length, `moves ${JSON.stringify(made)}`);
    made.forEach((move, index) => assertSameMove(move, expected[index] as RequestMove, index));
    const { keep_action: keepAction, ...ending } = stop.stop;
    assert.deepEqual(endingOf(result), ending);
    assert.equal((await store.list()).length > 0, keepAction, 'the action kept in the store');
  });
}

/** The moves the loop made, read off its events and the requests `fetch` saw. */
function movesMade(
  events: ClientEvent[],
  requests: { kind: 'send' | 'look_up'; headers: Record<string, string> }[],
) {
  const moves: { kind: 'send' | 'look_up'; afterMs: number; headers: Record<string, string> }[] =
    [];
  let wait = 0;
  for (const event of events) {
    if (event.type === 'waiting') {
      wait = event.ms;
    } else if (event.type === 'sending' || event.type === 'looking_up') {
      const request = requests[moves.length];
      assert.ok(request !== undefined, 'a request per move');
      assert.equal(request.kind, event.type === 'sending' ? 'send' : 'look_up');
      moves.push({ kind: request.kind, afterMs: wait, headers: request.headers });
      wait = 0;
    }
  }
  return moves;
}

function assertSameMove(
  made: { kind: 'send' | 'look_up'; afterMs: number; headers: Record<string, string> },
  expected: RequestMove,
  index: number,
): void {
  const [kind, move] =
    'send' in expected
      ? (['send', expected.send] as const)
      : (['look_up', expected.look_up] as const);
  assert.equal(made.kind, kind, `move ${index}`);
  assert.ok(
    Math.abs(made.afterMs - move.after_ms) <= 0.001,
    `move ${index}: waited ${made.afterMs}, not ${move.after_ms}`,
  );
  assert.deepEqual(made.headers, move.headers, `move ${index}: headers`);
}

/** How the client's result ends the run, in the vectors' words (without keep_action). */
function endingOf(result: ActionResult): Omit<VectorStop, 'keep_action'> {
  switch (result.kind) {
    case 'paid':
    case 'declined':
    case 'refused':
    case 'unreadable':
      return { ending: 'replied', status: result.status, from_look_up: result.fromStatusLookUp };
    case 'pending':
      return { ending: 'unsettled', why: result.why };
    case 'not_received':
    case 'sign_in_required':
      return { ending: result.kind };
  }
}
