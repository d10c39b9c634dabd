/**
 * How an action ended, as typed results (SPEC §7 names the bodies). Only a final reply and a
 * key the server never received end an action and delete it from the store; the others keep it
 * saved, because money may have moved and a later resume must ask about the same key rather
 * than pay again.
 */

import type { KnownBy } from './keyState.js';
import type { Unsettled } from './progress.js';

/** The state-changing operations an `Idempotency-Key` protects. */
export type Operation = 'pay_bill' | 'refund_payment';

/** The `201` body of `POST /v1/bills/{bill_id}/pay`. */
export interface Payment {
  readonly payment_id: string;
  readonly bill_id: string;
  readonly amount_paise: number;
  readonly status: string;
  readonly bank_reference: string;
}

/** The `201` body of `POST /v1/payments/{payment_id}/refunds`. */
export interface Refund {
  readonly refund_id: string;
  readonly payment_id: string;
  readonly amount_paise: number;
  readonly status: string;
  readonly bank_reference: string;
}

/** What a successful action returns. */
export type Receipt = Payment | Refund;

/** An RFC 9457 problem (`application/problem+json`); `type` is the stable part. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail?: string;
  readonly [extra: string]: unknown;
}

/** What every result names. */
export interface ResultBase {
  /** The action's `Idempotency-Key`. */
  readonly key: string;
  readonly operation: Operation;
  /** Attempts sent in this run (look-ups not counted). */
  readonly attempts: number;
}

/** What every final reply carries besides its body. */
interface FinalReply extends ResultBase {
  readonly status: number;
  /** Whether it replays a reply the server had saved (`Idempotent-Replayed: true`). */
  readonly replayed: boolean;
  /** Whether the look-up after the deadline told it, rather than an attempt. */
  readonly fromStatusLookUp: boolean;
  /** Whether the server held the request for the key's first attempt (`Preference-Applied`). */
  readonly waitedForFirstAttempt: boolean;
}

/** A 2xx with the payment or the refund. The action is over. */
export interface Paid<R extends Receipt = Receipt> extends FinalReply {
  readonly kind: 'paid';
  readonly receipt: R;
}

/** A 402: the bank declined. A final business outcome; the action is over. */
export interface Declined extends FinalReply {
  readonly kind: 'declined';
  /** The decline problem, or `null` when the body was not one. */
  readonly problem: Problem | null;
}

/** Another final status (400, 404, 422, …): the same bytes would be refused again. */
export interface Refused extends FinalReply {
  readonly kind: 'refused';
  /** The problem, whose `type` says why, or `null` when the body was not one. */
  readonly problem: Problem | null;
  readonly bodyText: string;
}

/**
 * A 2xx whose body is not the payment or refund (a proxy, a captive portal). The rules take
 * any 2xx as final, so the action is over; check the payments list before paying again.
 */
export interface Unreadable extends FinalReply {
  readonly kind: 'unreadable';
  readonly bodyText: string;
}

/** Not settled yet: the action stays saved. Show a status screen; resume later; never pay again. */
export interface Pending extends ResultBase {
  readonly kind: 'pending';
  readonly why: Unsettled;
  /** When the server expects to know, as its last reply said ("we will know by …"). */
  readonly knownBy: KnownBy | null;
}

/** The token was refused (401). The action stays saved: sign in again and resume it. */
export interface SignInRequired extends ResultBase {
  readonly kind: 'sign_in_required';
}

/** The server has no record of the key: nothing was charged. The action is deleted. */
export interface NotReceived extends ResultBase {
  readonly kind: 'not_received';
}

/** How a run of an action ended; `R` is the receipt a success carries. */
export type ActionResult<R extends Receipt = Receipt> =
  | Paid<R>
  | Declined
  | Refused
  | Unreadable
  | Pending
  | SignInRequired
  | NotReceived;

/** A final reply as the client received it. */
export interface ReplyFacts extends Omit<FinalReply, 'key' | 'operation' | 'attempts'> {
  readonly bodyText: string;
}

/** The typed result of a final reply to an action of `base.operation`. */
export function finalResult(base: ResultBase, reply: ReplyFacts): ActionResult {
  const { bodyText, ...facts } = reply;
  const body = parsedJson(bodyText);
  if (reply.status >= 200 && reply.status <= 299) {
    const receipt = base.operation === 'pay_bill' ? asPayment(body) : asRefund(body);
    return receipt === null
      ? { kind: 'unreadable', ...base, ...facts, bodyText }
      : { kind: 'paid', ...base, ...facts, receipt };
  }
  if (reply.status === 402) {
    return { kind: 'declined', ...base, ...facts, problem: asProblem(body) };
  }
  return { kind: 'refused', ...base, ...facts, problem: asProblem(body), bodyText };
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function asPayment(body: unknown): Payment | null {
  return hasStrings(body, ['payment_id', 'bill_id', 'status', 'bank_reference']) &&
    isAmount(body['amount_paise'])
    ? (body as unknown as Payment)
    : null;
}

function asRefund(body: unknown): Refund | null {
  return hasStrings(body, ['refund_id', 'payment_id', 'status', 'bank_reference']) &&
    isAmount(body['amount_paise'])
    ? (body as unknown as Refund)
    : null;
}

function asProblem(body: unknown): Problem | null {
  return hasStrings(body, ['type', 'title']) &&
    Number.isInteger(body['status']) &&
    (body['detail'] === undefined || typeof body['detail'] === 'string')
    ? (body as unknown as Problem)
    : null;
}

function hasStrings(body: unknown, names: readonly string[]): body is Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return false;
  }
  const record = body as Record<string, unknown>;
  return names.every((name) => typeof record[name] === 'string');
}

function isAmount(value: unknown): boolean {
  return Number.isSafeInteger(value);
}
