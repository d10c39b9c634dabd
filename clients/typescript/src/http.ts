/**
 * The client's requests over `fetch`, as SPEC §7 and the Rust client's `HttpTransport` send
 * them: the bearer token, the key in the IETF draft's quoted form (a Structured Field string),
 * the saved body string unchanged, and `Prefer: wait=N` when the rules ask for a wait. Every
 * request also names the client (`User-Agent: payments-client/<version>`; Chromium drops it
 * silently and sends its own, Firefox sends it) and carries a `traceparent`: the run's trace, a
 * new span. Each request, body included, is given up on after the attempt timeout (its `fetch`
 * aborted): a rejected `fetch` or a timeout is "no reply", never a reason to mint a new key.
 */

import type { Clock } from './clock.js';
import { TokenUnavailableError, describe } from './errors.js';
import { appliedWaitSeconds } from './preferApplied.js';
import type { PreferHeaders } from './progress.js';
import { parseRetryAfter } from './retryAfter.js';
import type { SavedAction } from './store.js';
import { TRACEPARENT_HEADER, traceparentIn } from './traceparent.js';
import { USER_AGENT } from './version.js';

/** What the client passes to `fetch`; the platform's `fetch` accepts it. */
export interface RequestInitLike {
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly signal: AbortSignal;
}

/** What the client reads of a `fetch` response. */
export interface ResponseLike {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/** The platform's `fetch`, or anything with its shape. */
export type FetchLike = (url: string, init: RequestInitLike) => Promise<ResponseLike>;

/** The bearer token, or a function that gives the current one (asked before every request). */
export type TokenSource = string | (() => string | Promise<string>);

/** A reply, read whole. */
export interface Reply {
  readonly status: number;
  /** `Retry-After` in milliseconds, or `null`. */
  readonly retryAfterMs: number | null;
  /** `Idempotent-Replayed: true`. */
  readonly replayed: boolean;
  /** The wait named by `Preference-Applied`, in seconds, or `null`. */
  readonly waitedSeconds: number | null;
  readonly bodyText: string;
}

/** What came back from one request. */
export type Exchange =
  | { readonly kind: 'reply'; readonly reply: Reply }
  | { readonly kind: 'no_reply'; readonly reason: string };

/** Talks to the payments API at one base URL as one user. */
export class HttpTransport {
  private readonly baseUrl: string;

  constructor(
    private readonly fetch: FetchLike,
    baseUrl: string,
    private readonly token: TokenSource,
    private readonly timeoutMs: number,
    /** The clock the timeout runs on: the client's, so a compressed clock shortens it too. */
    private readonly clock: Clock,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  /** Sends one attempt of `action`, in trace `traceId`: its key and its exact body string. */
  async send(action: SavedAction, prefer: PreferHeaders, traceId: string): Promise<Exchange> {
    const headers = {
      Authorization: await this.bearer(action.key),
      'Idempotency-Key': quotedKey(action.key),
      'Content-Type': 'application/json',
      ...prefer,
      ...identifying(traceId),
    };
    return this.exchange(this.baseUrl + action.path, {
      method: 'POST',
      headers,
      body: action.body,
    });
  }

  /** Asks for the outcome of `key` (`GET /v1/idempotency-keys/{key}`), in trace `traceId`. */
  async lookUp(key: string, prefer: PreferHeaders, traceId: string): Promise<Exchange> {
    const headers = { Authorization: await this.bearer(key), ...prefer, ...identifying(traceId) };
    const url = `${this.baseUrl}/v1/idempotency-keys/${encodeURIComponent(key)}`;
    return this.exchange(url, { method: 'GET', headers });
  }

  private async bearer(key: string): Promise<string> {
    try {
      const token = typeof this.token === 'string' ? this.token : await this.token();
      return `Bearer ${token}`;
    } catch (error) {
      throw new TokenUnavailableError(key, error);
    }
  }

  private async exchange(url: string, init: Omit<RequestInitLike, 'signal'>): Promise<Exchange> {
    const controller = new AbortController();
    const repliedInTime = new AbortController();
    // Raced as well as aborted, so that a fetch that ignores its signal cannot hang the run.
    const givenUp = this.clock.sleep(this.timeoutMs, repliedInTime.signal).then(() => {
      controller.abort();
      throw new GaveUp();
    });
    givenUp.catch(() => undefined);
    const replied = (async () => {
      const response = await this.fetch(url, { ...init, signal: controller.signal });
      return readReply(response, await response.text());
    })();
    replied.catch(() => undefined);
    try {
      return { kind: 'reply', reply: await Promise.race([replied, givenUp]) };
    } catch (error) {
      const reason =
        error instanceof GaveUp ? `no reply within ${this.timeoutMs / 1000} s` : describe(error);
      return { kind: 'no_reply', reason };
    } finally {
      repliedInTime.abort();
    }
  }
}

/** The attempt timeout ran out. */
class GaveUp extends Error {}

function readReply(response: ResponseLike, bodyText: string): Reply {
  const retryAfter = response.headers.get('retry-after');
  return {
    status: response.status,
    retryAfterMs: retryAfter === null ? null : parseRetryAfter(retryAfter),
    replayed: response.headers.get('idempotent-replayed') === 'true',
    waitedSeconds: appliedWaitSeconds(response.headers.get('preference-applied')),
    bodyText,
  };
}

/** The headers that name the client and place the request in trace `traceId`, as a new span. */
function identifying(traceId: string): Record<string, string> {
  return { 'User-Agent': USER_AGENT, [TRACEPARENT_HEADER]: traceparentIn(traceId) };
}

/** The key as the Rust client sends it: a Structured Field string, `"…"` with `"` and `\` escaped. */
function quotedKey(key: string): string {
  return `"${key.replace(/["\\]/g, '\\$&')}"`;
}
