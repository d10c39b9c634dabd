/**
 * Action stores over the key-value storage of phones and browsers: React Native's AsyncStorage
 * ({@link AsyncStorageStore}) and the browser's `localStorage` ({@link WebStorageStore}). Each
 * action is one JSON entry named by a prefix and its key, so the store shares the storage with
 * the rest of the app and lists only its own entries. A single `setItem` replaces an entry
 * whole, so a reader sees the old action or the new one, never half of one.
 */

import { StoreError, describe } from './errors.js';
import { type ActionStore, type SavedAction, oldestFirst, parseSavedAction } from './store.js';

/** The prefix of the entries a store writes, unless given another. */
export const DEFAULT_PREFIX = 'payments-client/action/';

/** What the store needs of React Native's AsyncStorage (`@react-native-async-storage/...`). */
export interface AsyncStorageLike {
  getItem(key: string): Promise<string | null>;
  setItem(key: string, value: string): Promise<void>;
  removeItem(key: string): Promise<void>;
  getAllKeys(): Promise<readonly string[]>;
}

/** What the store needs of a Web Storage object (`window.localStorage`). */
export interface WebStorageLike {
  readonly length: number;
  key(index: number): string | null;
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** The storage operations both adapters are written on (synchronous ones awaited as well). */
interface Entries {
  read(name: string): Promise<string | null> | string | null;
  write(name: string, text: string): Promise<void> | void;
  delete(name: string): Promise<void> | void;
  names(): Promise<readonly string[]> | readonly string[];
}

/** Actions as prefixed JSON entries of a key-value storage. */
class PrefixedEntryStore implements ActionStore {
  constructor(
    private readonly entries: Entries,
    private readonly prefix: string,
  ) {}

  async save(action: SavedAction): Promise<void> {
    await attempt('save', `cannot save action ${action.key}`, () =>
      this.entries.write(this.prefix + action.key, JSON.stringify(action)),
    );
  }

  async list(): Promise<SavedAction[]> {
    return attempt('list', 'cannot list the saved actions', async () => {
      const names = (await this.entries.names()).filter((name) => name.startsWith(this.prefix));
      const actions: SavedAction[] = [];
      for (const name of names) {
        const text = await this.entries.read(name);
        if (text !== null) {
          actions.push(parseSavedAction(text, `entry ${name}`));
        }
      }
      return oldestFirst(actions);
    });
  }

  async remove(key: string): Promise<void> {
    await attempt('remove', `cannot remove action ${key}`, () =>
      this.entries.delete(this.prefix + key),
    );
  }
}

/** Actions in React Native's AsyncStorage, one entry per action under `prefix`. */
export class AsyncStorageStore extends PrefixedEntryStore {
  constructor(storage: AsyncStorageLike, prefix: string = DEFAULT_PREFIX) {
    super(
      {
        read: (name) => storage.getItem(name),
        write: (name, text) => storage.setItem(name, text),
        delete: (name) => storage.removeItem(name),
        names: () => storage.getAllKeys(),
      },
      prefix,
    );
  }
}

/**
 * Actions in a browser's Web Storage (`localStorage`; `sessionStorage` would not survive the
 * tab), one entry per action under `prefix`.
 */
export class WebStorageStore extends PrefixedEntryStore {
  constructor(storage: WebStorageLike, prefix: string = DEFAULT_PREFIX) {
    super(
      {
        read: (name) => storage.getItem(name),
        write: (name, text) => storage.setItem(name, text),
        delete: (name) => storage.removeItem(name),
        names: () =>
          Array.from({ length: storage.length }, (_, index) => storage.key(index)).filter(
            (name): name is string => name !== null,
          ),
      },
      prefix,
    );
  }
}

/** Runs `work`, turning a failure of the storage into a {@link StoreError}. */
async function attempt<T>(
  operation: StoreError['operation'],
  message: string,
  work: () => Promise<T> | T,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof StoreError) {
      throw error;
    }
    throw new StoreError(operation, `${message}: ${describe(error)}`, error);
  }
}
