/**
 * The body of `GET /v1/idempotency-keys/{key}` (SPEC §7), as the server writes it
 * (`KeyStatusResponse`, `shared/src/api/key_status.rs`):
 *
 * ```json
 * {"state":"done","operation":"pay_bill","status":201,"reply":{...},"expires_at":"2026-12-03T10:00:00Z"}
 * ```
 *
 * It is read with `JSON.parse` and plain checks:
 *
 * - the body is a JSON object;
 * - `state` is `started`, `unknown`, `released` or `done`;
 * - `operation` is `pay_bill` or `refund_payment`;
 * - `expires_at` is an RFC 3339 date-time (`Z` or a `±hh:mm` offset, fractional seconds
 *   allowed), checked by a regular expression;
 * - a `done` key needs `status`, an integer from 100 to 599, and `reply`, present and not
 *   `null` (else `answer`, its deprecated alias, which servers of the previous version send
 *   alone); the other states ignore them;
 * - an `unknown` key may carry `next_check_at` (when the rail's rules let the bank be asked
 *   next) or `settlement_due_at` (its checks ran out: when the bank's settlement file is due),
 *   RFC 3339 date-times, kept when well formed, so an app can say "we will know by …".
 *   Other members are ignored.
 *
 * A body that is anything else tells nothing: the rules ask again.
 *
 * The Rust rules (`KeyState::from_body` in `shared/src/retry/progress.rs`) read the same body
 * with serde, and differ only on bodies the server never sends:
 *
 * - a member given twice: `JSON.parse` keeps the last, serde refuses the body;
 * - the array form (`[state, operation, status, reply, expires_at]`) and serde's map form of
 *   the operation (`{"pay_bill":null}`): serde accepts them, this reader does not;
 * - escaped lone surrogates (`"\ud800"`): `JSON.parse` accepts them, serde refuses them in the
 *   five fields;
 * - `status`: serde takes any `u16` written as an integer and checks it only when it is there,
 *   this reader takes 100 to 599 (`201.0` included) and checks it only for a `done` key;
 * - `expires_at`: the regular expression checks each field's range but not the calendar
 *   (`2026-02-30`) nor where a leap second may fall, which the `time` crate does.
 *
 * The look-up bodies of the shared test vectors (`shared/vectors/client-rules.json`) are read
 * alike by both.
 */

import type { Operation } from './results.js';

/** Where a looked-up key stands. */
export type KeyState =
  | { readonly state: 'started' }
  | { readonly state: 'unknown' }
  | { readonly state: 'released' }
  /** Finished, with the saved reply's status (201, or 402 for a decline). */
  | { readonly state: 'done'; readonly status: number };

/** A key status, as read from its body. */
export interface KeyStatus {
  readonly keyState: KeyState;
  readonly operation: Operation;
  /** When the key stops being replayed (RFC 3339, as sent). */
  readonly expiresAt: string;
  /**
   * For a `done` key, the saved reply (the payment, the refund or the problem) as parsed from
   * the body; `null` for the other states.
   */
  readonly reply: unknown;
  /** For an `unknown` key, when the bank may be asked about it next (RFC 3339); else `null`. */
  readonly nextCheckAt: string | null;
  /**
   * For an `unknown` key whose status checks ran out, when the bank's settlement file is due
   * (RFC 3339); else `null`.
   */
  readonly settlementDueAt: string | null;
}

/**
 * An RFC 3339 `date-time`: `YYYY-MM-DD`, `T` (or `t`, or a space, as RFC 3339 §5.6 allows),
 * `hh:mm:ss` (`:60` for a leap second), an optional fraction, then `Z`/`z` or `±hh:mm`.
 */
const RFC3339_DATE_TIME = new RegExp(
  [
    '^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])', // full-date
    '[Tt ]',
    '(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?', // partial-time
    '(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$', // time-offset
  ].join(''),
);

/** The key state a look-up's 200 body tells, or `null` when the body is not a key status. */
export function keyStateFromBody(body: string): KeyState | null {
  return readKeyStatus(body)?.keyState ?? null;
}

/** The whole key status in a look-up's 200 body, or `null` when it is not one. */
export function readKeyStatus(body: string): KeyStatus | null {
  const value = jsonObjectOf(body);
  if (value === null) {
    return null;
  }
  const {
    state,
    operation,
    expires_at: expiresAt,
    status,
    reply: sent,
    answer: sentAsDeprecatedAlias,
    next_check_at: nextCheck,
    settlement_due_at: settlementDue,
  } = value;
  if (operation !== 'pay_bill' && operation !== 'refund_payment') {
    return null;
  }
  if (typeof expiresAt !== 'string' || !RFC3339_DATE_TIME.test(expiresAt)) {
    return null;
  }
  switch (state) {
    case 'started':
    case 'released':
      return { keyState: { state }, operation, expiresAt, ...NOTHING_MORE };
    case 'unknown':
      return {
        keyState: { state },
        operation,
        expiresAt,
        ...NOTHING_MORE,
        nextCheckAt: dateTimeOrNull(nextCheck),
        settlementDueAt: dateTimeOrNull(settlementDue),
      };
    case 'done': {
      const reply = sent ?? sentAsDeprecatedAlias;
      if (!isHttpStatus(status) || reply === undefined || reply === null) {
        return null;
      }
      return { keyState: { state, status }, operation, expiresAt, ...NOTHING_MORE, reply };
    }
    default:
      return null;
  }
}

/**
 * When the server expects to know an unsettled action's outcome (SPEC §4): the rail's next
 * status check, or the bank's settlement file once the checks ran out.
 */
export interface KnownBy {
  readonly kind: 'next_status_check' | 'settlement';
  /** An RFC 3339 date-time, as the server wrote it. */
  readonly at: string;
}

/**
 * What a reply's body names (an `outcome-pending` or `outcome-awaiting-settlement` problem, or
 * an `unknown` key's status: they share the member names), the settlement first; `null` when
 * it names neither or the body is not a JSON object.
 */
export function knownByOf(bodyText: string): KnownBy | null {
  const record = jsonObjectOf(bodyText);
  if (record === null) {
    return null;
  }
  const settlement = dateTimeOrNull(record['settlement_due_at']);
  if (settlement !== null) {
    return { kind: 'settlement', at: settlement };
  }
  const nextCheck = dateTimeOrNull(record['next_check_at']);
  return nextCheck === null ? null : { kind: 'next_status_check', at: nextCheck };
}

/** `text` parsed as a JSON object, or `null` when it is not one. */
function jsonObjectOf(text: string): Record<string, unknown> | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/** The members a state does not carry. */
const NOTHING_MORE = { reply: null, nextCheckAt: null, settlementDueAt: null } as const;

/** `value` if it is an RFC 3339 date-time, else `null`. */
function dateTimeOrNull(value: unknown): string | null {
  return typeof value === 'string' && RFC3339_DATE_TIME.test(value) ? value : null;
}

function isHttpStatus(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 100 && (value as number) <= 599;
}
