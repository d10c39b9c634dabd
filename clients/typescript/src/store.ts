/**
 * Where pending actions live between the tap on Pay and the final reply. An action is saved
 * *before* its first send and removed at its final reply (or when the server never received
 * it), so whatever happens in between (a crash, a killed app, a reboot) the next start finds the
 * same key and the same body bytes and carries on with them instead of minting a new key.
 *
 * Adapters: {@link MemoryStore} here (tests, and tools that need no durability);
 * `AsyncStorageStore` and `WebStorageStore` in `keyValueStores.ts`; `FileStore` in
 * `fileStore.ts`, exported from `payments-client/node` only.
 */

import { StoreError } from './errors.js';
import type { Operation } from './results.js';

/** One action as saved: everything a resume needs to send exactly what the first send sent. */
export interface SavedAction {
  /** The format of this record. */
  readonly version: 1;
  /** The `Idempotency-Key`, minted once when the action started. */
  readonly key: string;
  /** The user whose token sends it: a key is only meaningful together with its user. */
  readonly userId: string;
  readonly operation: Operation;
  /** The bill or payment id in the path. */
  readonly target: string;
  /** The request path, e.g. `/v1/bills/elec-1/pay`. */
  readonly path: string;
  /** The body exactly as first serialised; every attempt sends this string, never a re-encoding. */
  readonly body: string;
  /** When the user started it (ms since the epoch): the deadline counts from here, across restarts. */
  readonly startedAtMs: number;
}

/** Durable storage of pending actions. Every method may reject with a {@link StoreError}. */
export interface ActionStore {
  /** Saves `action` durably: once this resolves, the action survives a restart. */
  save(action: SavedAction): Promise<void>;
  /** Every saved action (of every user), oldest first. */
  list(): Promise<SavedAction[]>;
  /** Removes the action with `key`; no error if it is gone. */
  remove(key: string): Promise<void>;
}

/** What is wrong with `value` as a saved action, or `null` when it is one. */
export function savedActionFault(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) {
    return 'not an object';
  }
  const action = value as Record<string, unknown>;
  if (action['version'] !== 1) {
    return `unknown version ${String(action['version'])}`;
  }
  for (const name of ['key', 'userId', 'target', 'path', 'body']) {
    if (typeof action[name] !== 'string' || action[name] === '') {
      return `${name} is not a non-empty string`;
    }
  }
  if (action['operation'] !== 'pay_bill' && action['operation'] !== 'refund_payment') {
    return `unknown operation ${String(action['operation'])}`;
  }
  return Number.isFinite(action['startedAtMs']) ? null : 'startedAtMs is not a number';
}

/** `text` (from an entry named `where`) as a saved action. */
export function parseSavedAction(text: string, where: string): SavedAction {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new StoreError('list', `${where} is not a saved action: not JSON`, cause);
  }
  const fault = savedActionFault(value);
  if (fault !== null) {
    throw new StoreError('list', `${where} is not a saved action: ${fault}`);
  }
  return value as SavedAction;
}

/** `actions` oldest first (by start, then key, so the order is stable). */
export function oldestFirst(actions: SavedAction[]): SavedAction[] {
  return actions.sort(
    (a, b) => a.startedAtMs - b.startedAtMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  );
}

/** Actions in memory: for tests and tools; nothing survives the process. */
export class MemoryStore implements ActionStore {
  private readonly actions = new Map<string, string>();

  async save(action: SavedAction): Promise<void> {
    this.actions.set(action.key, JSON.stringify(action));
  }

  async list(): Promise<SavedAction[]> {
    return oldestFirst(
      [...this.actions].map(([key, text]) => parseSavedAction(text, `memory entry ${key}`)),
    );
  }

  async remove(key: string): Promise<void> {
    this.actions.delete(key);
  }
}
