/**
 * Progress of an action, reported as it happens so a UI can show it (attempt number, wait,
 * outcome), as the Rust client's `Event` does. Reporting is a callback and never decides
 * anything: an exception thrown by the callback is swallowed.
 *
 * Waiting for the first attempt (`Prefer: wait`) shows in two places: `sending` names the wait
 * the attempt asks for, and `replied` the wait the server applied (`Preference-Applied`).
 */

import type { ActionResult } from './results.js';

/** Something that happened to an action; every event names the action's key. */
export type ClientEvent =
  /** A saved action is carried on (after a restart, a sign-in, or a pending outcome). */
  | { readonly type: 'resuming'; readonly key: string; readonly elapsedMs: number }
  /** Attempt `attempt` (1 for the first in this run) is being sent. */
  | {
      readonly type: 'sending';
      readonly key: string;
      readonly attempt: number;
      /** The `Prefer: wait` it asks for, in seconds, or `null`. */
      readonly preferWaitSeconds: number | null;
    }
  /** The server replied to an attempt. */
  | {
      readonly type: 'replied';
      readonly key: string;
      readonly attempt: number;
      readonly status: number;
      readonly replayed: boolean;
      /** The wait the server applied (`Preference-Applied: wait=N`), in seconds, or `null`. */
      readonly waitedSeconds: number | null;
    }
  /** An attempt got no reply: it timed out, or the connection failed. */
  | {
      readonly type: 'no_reply';
      readonly key: string;
      readonly attempt: number;
      readonly reason: string;
    }
  /** The client waits before its next request. */
  | {
      readonly type: 'waiting';
      readonly key: string;
      readonly ms: number;
      /** The last reply's `Retry-After` (a floor under the wait), or `null`. */
      readonly retryAfterMs: number | null;
    }
  /** The deadline or the attempt bound is reached: no more sends; the key is looked up. */
  | { readonly type: 'stopped_sending'; readonly key: string; readonly attempts: number }
  /** Look-up `check` (1 for the first) of the key's status is being sent. */
  | { readonly type: 'looking_up'; readonly key: string; readonly check: number }
  /** A look-up told nothing (no reply, an error status, a body that is not a key status). */
  | {
      readonly type: 'look_up_failed';
      readonly key: string;
      readonly check: number;
      readonly reason: string;
    }
  /** The run ended. */
  | {
      readonly type: 'stopped';
      readonly key: string;
      readonly result: ActionResult['kind'];
      /** Whether the action stays saved for a later resume. */
      readonly keptAction: boolean;
    }
  /** The outcome is final but the saved action could not be removed; a resume only replays it. */
  | { readonly type: 'forget_failed'; readonly key: string; readonly reason: string };

/** Receives {@link ClientEvent}s. */
export type EventListener = (event: ClientEvent) => void;
