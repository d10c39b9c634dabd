/**
 * Time as the client sees it: the wall clock that dates an action (its deadline counts from
 * the first send, across restarts) and the sleeps between requests. A parameter, so tests run
 * the loop on a fake clock that advances only when slept on.
 */

/** The client's source of time. */
export interface Clock {
  /** The wall-clock time, in milliseconds since the epoch. */
  nowMs(): number;
  /**
   * Resolves after `ms` milliseconds on this clock. When `cancel` is aborted first, the sleep may
   * stop early and never resolve (the attempt timeout cancels its sleep once a reply comes, so
   * no timer outlives its request); a clock may also ignore `cancel`.
   */
  sleep(ms: number, cancel?: AbortSignal): Promise<void>;
}

/** Real time: `Date.now()` and `setTimeout`. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
  sleep: (ms, cancel) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      cancel?.addEventListener('abort', () => clearTimeout(timer), { once: true });
    }),
};
