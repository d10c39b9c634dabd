/**
 * {@link PaymentsClient}: one user's client. It starts actions (minting the key and saving the
 * action before anything is sent), lists and resumes saved ones, and runs each under the shared
 * rules (`run.ts`). One tap on Pay is one action with one key, and the key never changes while
 * the action lives; only a new user action gets a new key (SPEC §6).
 */

import { type Clock, systemClock } from './clock.js';
import { InvalidRequestError, SaveFailedError } from './errors.js';
import type { EventListener } from './events.js';
import { type FetchLike, HttpTransport, type TokenSource } from './http.js';
import { randomKey } from './keys.js';
import { defaultRandom } from './random.js';
import type { ActionResult, Operation, Payment, Refund } from './results.js';
import { type ClientRules, clientRules } from './rules.js';
import { runAction, type RunContext } from './run.js';
import { type ActionStore, type SavedAction, savedActionFault } from './store.js';

/** The largest amount the API takes, in paise (SPEC §7). */
export const MAX_AMOUNT_PAISE = 1_000_000_000;

/** How to build a {@link PaymentsClient}. */
export interface PaymentsClientOptions {
  /** The API's base URL (the edge), e.g. `https://pay.example`. */
  readonly baseUrl: string;
  /** The user's bearer token, or a function giving the current one before every request. */
  readonly token: TokenSource;
  /** The user the token names: saved actions are listed and resumed per user. */
  readonly userId: string;
  /** Where actions are saved before their first send. */
  readonly store: ActionStore;
  /** The rules, over the defaults (see {@link clientRules}). */
  readonly rules?: Partial<ClientRules>;
  /** `fetch`; the platform's by default. */
  readonly fetch?: FetchLike;
  /** Time; the system clock by default. */
  readonly clock?: Clock;
  /**
   * Uniform random numbers in [0, 1) for the jitter. By default 53 bits of
   * `crypto.getRandomValues` each, or `Math.random` where the platform lacks it.
   */
  readonly random?: () => number;
  /** Receives progress events (for a UI); it never decides anything. */
  readonly onEvent?: EventListener;
  /**
   * Makes the `Idempotency-Key` of each new action: a fresh, unguessable, non-empty string
   * every call (the server may restrict the form; a UUID always fits). By default a random
   * (version 4) UUID from `crypto.randomUUID`, else from 16 bytes of `crypto.getRandomValues`
   * (React Native with `react-native-get-random-values`); with neither, starting an action throws.
   */
  readonly mintKey?: () => string;
}

/** A client for one user, with a store of pending actions. */
export class PaymentsClient {
  private readonly userId: string;
  private readonly context: RunContext;
  private readonly mintKey: () => string;
  /** Runs in progress by key, so resuming an action already running joins its run. */
  private readonly running = new Map<string, Promise<ActionResult>>();

  constructor(options: PaymentsClientOptions) {
    const rules = clientRules(options.rules);
    const fetch = options.fetch ?? platformFetch();
    const onEvent = options.onEvent;
    this.userId = options.userId;
    this.mintKey = options.mintKey ?? (() => randomKey(globalThis.crypto));
    const clock = options.clock ?? systemClock;
    this.context = {
      rules,
      transport: new HttpTransport(
        fetch,
        options.baseUrl,
        options.token,
        rules.attemptTimeoutMs,
        clock,
      ),
      store: options.store,
      clock,
      random: options.random ?? defaultRandom(),
      report: (event) => {
        try {
          onEvent?.(event);
        } catch {
          // Reporting never decides anything, a failing listener included.
        }
      },
    };
  }

  /**
   * Pays bill `billId`: `POST /v1/bills/{billId}/pay` with `{"amount_paise","payer_vpa"}`.
   *
   * @throws InvalidRequestError before anything is saved, for an amount that is not a whole
   *   number of paise from 1 to {@link MAX_AMOUNT_PAISE}, or an empty bill id.
   * @throws SaveFailedError when the action cannot be saved: nothing was sent.
   * @throws TokenUnavailableError when the token cannot be had; the action stays saved.
   */
  async payBill(
    billId: string,
    amountPaise: number,
    payerVpa: string,
  ): Promise<ActionResult<Payment>> {
    checkTarget('bill_id', billId);
    checkAmount(amountPaise);
    if (typeof payerVpa !== 'string') {
      throw new InvalidRequestError('payer_vpa', 'payer_vpa must be a string');
    }
    const body = JSON.stringify({ amount_paise: amountPaise, payer_vpa: payerVpa });
    const action = await this.begin(
      'pay_bill',
      billId,
      `/v1/bills/${encodeURIComponent(billId)}/pay`,
      body,
    );
    // The receipt was read as a payment, the action being a pay_bill.
    return (await this.run(action)) as ActionResult<Payment>;
  }

  /**
   * Refunds `amountPaise` of payment `paymentId`: `POST /v1/payments/{paymentId}/refunds` with
   * `{"amount_paise"}`. Throws as {@link PaymentsClient.payBill} does.
   */
  async refund(paymentId: string, amountPaise: number): Promise<ActionResult<Refund>> {
    checkTarget('payment_id', paymentId);
    checkAmount(amountPaise);
    const body = JSON.stringify({ amount_paise: amountPaise });
    const path = `/v1/payments/${encodeURIComponent(paymentId)}/refunds`;
    const action = await this.begin('refund_payment', paymentId, path, body);
    // The receipt was read as a refund, the action being a refund_payment.
    return (await this.run(action)) as ActionResult<Refund>;
  }

  /** This user's saved actions, oldest first: run them with {@link PaymentsClient.resume}. */
  async pending(): Promise<SavedAction[]> {
    const all = await this.context.store.list();
    return all.filter((action) => action.userId === this.userId);
  }

  /**
   * Carries on with a saved action, with its saved key and body: after a restart, a sign-in,
   * or later for a pending outcome. Past its deadline it is only looked up, never sent.
   *
   * @throws InvalidRequestError when `saved` is not a saved action of this client's user.
   */
  async resume(saved: SavedAction): Promise<ActionResult> {
    const fault = savedActionFault(saved);
    if (fault !== null) {
      throw new InvalidRequestError('saved_action', `not a saved action: ${fault}`);
    }
    if (saved.userId !== this.userId) {
      throw new InvalidRequestError('saved_action', "the action is another user's");
    }
    const elapsedMs = Math.max(0, this.context.clock.nowMs() - saved.startedAtMs);
    this.context.report({ type: 'resuming', key: saved.key, elapsedMs });
    return this.run(saved);
  }

  /** Resumes every saved action of this user, one after the other, oldest first. */
  async resumeAll(): Promise<ActionResult[]> {
    const results: ActionResult[] = [];
    for (const saved of await this.pending()) {
      results.push(await this.resume(saved));
    }
    return results;
  }

  /** A new user action: mints its key, freezes its body, and saves both before any send. */
  private async begin(
    operation: Operation,
    target: string,
    path: string,
    body: string,
  ): Promise<SavedAction> {
    const key = this.mintKey();
    if (typeof key !== 'string' || key === '') {
      throw new Error(`options.mintKey gave ${JSON.stringify(key)}, not a non-empty string`);
    }
    const action: SavedAction = {
      version: 1,
      key,
      userId: this.userId,
      operation,
      target,
      path,
      body,
      startedAtMs: this.context.clock.nowMs(),
    };
    try {
      await this.context.store.save(action);
    } catch (error) {
      throw new SaveFailedError(action.key, error);
    }
    return action;
  }

  private run(action: SavedAction): Promise<ActionResult> {
    const joined = this.running.get(action.key);
    if (joined !== undefined) {
      return joined;
    }
    const run = runAction(this.context, action).finally(() => this.running.delete(action.key));
    this.running.set(action.key, run);
    return run;
  }
}

function checkAmount(amountPaise: number): void {
  if (!Number.isSafeInteger(amountPaise) || amountPaise < 1 || amountPaise > MAX_AMOUNT_PAISE) {
    throw new InvalidRequestError(
      'amount_paise',
      `amount_paise must be a whole number of paise from 1 to ${MAX_AMOUNT_PAISE}: ${amountPaise}`,
    );
  }
}

function checkTarget(field: 'bill_id' | 'payment_id', id: string): void {
  if (typeof id !== 'string' || id === '') {
    throw new InvalidRequestError(field, `${field} must be a non-empty string`);
  }
}

function platformFetch(): FetchLike {
  if (typeof globalThis.fetch !== 'function') {
    throw new Error('fetch is not available on this platform: pass options.fetch');
  }
  return (url, init) => globalThis.fetch(url, init);
}
