/**
 * Client (e) of the incident replay (`tools/incident-replay/src/typescript_phones.rs`): every
 * customer of the night pays with this package, in one Node process.
 *
 * Reads the plan as JSON on standard input: the API, the night's clock (its wall-clock origin
 * and how many real milliseconds a second of the night lasts), the phones' timeout in the
 * night's milliseconds, a seed, and the customers (user, bill, account, amount, arrival).
 * Each customer arrives at their time, pays with a `PaymentsClient` of their own on the night's
 * clock (so a 15 s timeout, the 10-minute deadline and every backoff keep the article's
 * proportions, as the Rust phones' do) with `Prefer: wait` as client (d), and the jitter drawn
 * from a generator seeded per customer. Prints one JSON array: per customer, when each attempt
 * went out and how long it took to a final reply (the night's milliseconds), the 409s heard
 * and what the phone showed. Tokens are signed with `AUTH_JWT_SECRET` from the environment.
 */

import { MemoryStore, PaymentsClient, type ActionResult, type Clock } from '../src/node.js';
import { signToken } from '../dev/environment.js';

interface Customer {
  readonly index: number;
  readonly user: string;
  readonly bill: string;
  readonly vpa: string;
  readonly amount_paise: number;
  readonly arrival_ms: number;
}

interface Plan {
  readonly api: string;
  readonly origin_unix_ms: number;
  readonly real_ms_per_second: number;
  readonly timeout_ms: number;
  readonly seed: number;
  readonly customers: readonly Customer[];
}

const plan = JSON.parse(await readStdin()) as Plan;

/** The night's clock: its milliseconds since the night began, passing as fast as the replay's. */
const nightClock: Clock = {
  nowMs: () => ((Date.now() - plan.origin_unix_ms) * 1000) / plan.real_ms_per_second,
  sleep: (ms, cancel) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, (ms * plan.real_ms_per_second) / 1000);
      cancel?.addEventListener('abort', () => clearTimeout(timer), { once: true });
    }),
};

const results = await Promise.all(plan.customers.map(payAtArrival));
process.stdout.write(`${JSON.stringify(results)}\n`);

async function payAtArrival(customer: Customer) {
  await nightClock.sleep(Math.max(0, customer.arrival_ms - nightClock.nowMs()));
  const sentAt: number[] = [];
  let inProgress409s = 0;
  const client = new PaymentsClient({
    baseUrl: plan.api,
    token: signToken(customer.user),
    userId: customer.user,
    store: new MemoryStore(),
    clock: nightClock,
    rules: { attemptTimeoutMs: plan.timeout_ms },
    random: seededUnits(plan.seed, customer.index),
    onEvent: (event) => {
      if (event.type === 'sending') sentAt.push(nightClock.nowMs());
      if (event.type === 'replied' && event.status === 409) inProgress409s += 1;
    },
  });
  const started = nightClock.nowMs();
  const result = await client.payBill(customer.bill, customer.amount_paise, customer.vpa);
  return {
    index: customer.index,
    sent_at_ms: sentAt,
    in_progress_409s: inProgress409s,
    view: view(result),
    took_ms: nightClock.nowMs() - started,
  };
}

/** What the customer's phone showed, in the replay's words. */
function view(result: ActionResult): string {
  switch (result.kind) {
    case 'paid':
      return 'paid';
    case 'declined':
      return 'declined';
    case 'refused':
      return 'refused';
    default:
      return 'no_final_reply';
  }
}

/** Uniform units in [0, 1) from a generator (SplitMix32) seeded by the night and the customer. */
function seededUnits(seed: number, index: number): () => number {
  let state = (seed ^ Math.imul(index + 1, 0x9e3779b9)) >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 16), 0x85ebca6b) >>> 0;
    mixed = Math.imul(mixed ^ (mixed >>> 13), 0xc2b2ae35) >>> 0;
    return ((mixed ^ (mixed >>> 16)) >>> 0) / 2 ** 32;
  };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
