/**
 * Test doubles shared by the tests: a clock that advances only when slept on, a scripted
 * `fetch` that replies to attempts and look-ups from two lists and records every request, and
 * in-memory stand-ins for AsyncStorage and Web Storage.
 */

import type {
  AsyncStorageLike,
  Clock,
  FetchLike,
  RequestInitLike,
  ResponseLike,
  WebStorageLike,
} from '../../src/index.js';

/** A clock that starts at a fixed instant and moves only when a sleep on it ends (or when told). */
export class FakeClock implements Clock {
  now = Date.UTC(2026, 11, 3, 10, 0, 0);
  readonly sleeps: number[] = [];

  nowMs(): number {
    return this.now;
  }

  /**
   * Lazy, as a real timer is: it yields to what is already settled first, so a reply that came
   * cancels the attempt's timeout before time moves; a cancelled sleep never ends.
   */
  async sleep(ms: number, cancel?: AbortSignal): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    if (cancel?.aborted) {
      return new Promise(() => undefined);
    }
    this.sleeps.push(ms);
    this.now += ms;
  }
}

/** One scripted reply: a reply, a failed connection, or a request that hangs past its timeout. */
export type Step =
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string }
  | { readonly fail: 'network' }
  | { readonly fail: 'timeout'; readonly takesMs: number };

/** A request as the server would have seen it. */
export interface Recorded {
  /** The fake clock's time when the request was sent. */
  readonly atMs: number;
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string | undefined;
}

/**
 * A `fetch` replying to POSTs from `sends` and GETs from `lookUps`, in order (the last step of a
 * list repeats), recording every request. A `network` failure rejects at once; a `timeout`
 * advances the clock by `takesMs` and rejects as an aborted fetch would.
 */
export class ScriptedFetch {
  readonly requests: Recorded[] = [];

  constructor(
    private readonly clock: FakeClock,
    private readonly sends: Step[],
    private readonly lookUps: Step[] = [],
  ) {}

  readonly fetch: FetchLike = async (url: string, init: RequestInitLike): Promise<ResponseLike> => {
    this.requests.push({
      atMs: this.clock.now,
      method: init.method,
      url,
      headers: { ...init.headers },
      body: init.body,
    });
    const script = init.method === 'POST' ? this.sends : this.lookUps;
    const step = script.length > 1 ? script.shift() : script[0];
    if (step === undefined) {
      throw new Error(`no scripted reply for ${init.method} ${url}`);
    }
    if ('fail' in step) {
      if (step.fail === 'timeout') {
        this.clock.now += step.takesMs;
        throw Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });
      }
      throw new TypeError('fetch failed');
    }
    const headers = new Map(
      Object.entries(step.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]),
    );
    return {
      status: step.status,
      headers: { get: (name: string) => headers.get(name.toLowerCase()) ?? null },
      text: async () => step.body ?? '',
    };
  };

  get posts(): Recorded[] {
    return this.requests.filter((request) => request.method === 'POST');
  }

  get gets(): Recorded[] {
    return this.requests.filter((request) => request.method === 'GET');
  }
}

/** React Native's AsyncStorage, in memory. */
export class MemoryAsyncStorage implements AsyncStorageLike {
  readonly entries = new Map<string, string>();

  async getItem(key: string): Promise<string | null> {
    return this.entries.get(key) ?? null;
  }

  async setItem(key: string, value: string): Promise<void> {
    this.entries.set(key, value);
  }

  async removeItem(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async getAllKeys(): Promise<readonly string[]> {
    return [...this.entries.keys()];
  }
}

/** Web Storage (`localStorage`), in memory. */
export class MemoryWebStorage implements WebStorageLike {
  readonly entries = new Map<string, string>();

  get length(): number {
    return this.entries.size;
  }

  key(index: number): string | null {
    return [...this.entries.keys()][index] ?? null;
  }

  getItem(key: string): string | null {
    return this.entries.get(key) ?? null;
  }

  setItem(key: string, value: string): void {
    this.entries.set(key, value);
  }

  removeItem(key: string): void {
    this.entries.delete(key);
  }
}
