/**
 * Actions as files, for Node (exported from `payments-client/node` only, so browser bundles
 * never import `node:fs`): a directory with one JSON file per action, named after its key, as
 * the Rust client's `ActionStore` keeps them.
 *
 * A save is atomic and durable: the JSON goes to a temporary file in the same directory, which
 * is fsynced, renamed over the final name, and the directory is fsynced so that the rename
 * itself survives a power cut. A reader sees the whole action or none of it; a temporary file
 * left by a crash mid-save (its name starts with a dot) is not an action and is ignored.
 */

import { open, readFile, readdir, rename, mkdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';

import { StoreError, describe } from './errors.js';
import { type ActionStore, type SavedAction, oldestFirst, parseSavedAction } from './store.js';

const EXTENSION = '.json';

/** Keys that are safe as file names everywhere; the client's own keys (UUIDs) always are. */
const FILE_SAFE_KEY = /^[A-Za-z0-9_-]{1,200}$/;

/** A directory of pending actions, created on the first save. */
export class FileStore implements ActionStore {
  constructor(readonly dir: string) {}

  async save(action: SavedAction): Promise<void> {
    const finalPath = this.pathOf(action.key, 'save');
    const temporary = join(this.dir, `.${action.key}${EXTENSION}.tmp`);
    try {
      await mkdir(this.dir, { recursive: true });
      await writeSynced(temporary, `${JSON.stringify(action, null, 2)}\n`);
      await rename(temporary, finalPath);
      await this.syncDir();
    } catch (error) {
      await unlink(temporary).catch(() => undefined);
      throw new StoreError('save', `cannot save ${finalPath}: ${describe(error)}`, error);
    }
  }

  async list(): Promise<SavedAction[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      if (codeOf(error) === 'ENOENT') {
        return [];
      }
      throw new StoreError('list', `cannot list ${this.dir}: ${describe(error)}`, error);
    }
    const actions: SavedAction[] = [];
    for (const name of names.filter((name) => name.endsWith(EXTENSION) && !name.startsWith('.'))) {
      const path = join(this.dir, name);
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (error) {
        throw new StoreError('list', `cannot read ${path}: ${describe(error)}`, error);
      }
      actions.push(parseSavedAction(text, path));
    }
    return oldestFirst(actions);
  }

  async remove(key: string): Promise<void> {
    const path = this.pathOf(key, 'remove');
    try {
      await unlink(path);
      await this.syncDir();
    } catch (error) {
      if (codeOf(error) !== 'ENOENT') {
        throw new StoreError('remove', `cannot remove ${path}: ${describe(error)}`, error);
      }
    }
  }

  private pathOf(key: string, operation: 'save' | 'remove'): string {
    if (!FILE_SAFE_KEY.test(key)) {
      throw new StoreError(operation, `the key ${JSON.stringify(key)} is not safe as a file name`);
    }
    return join(this.dir, key + EXTENSION);
  }

  /** Makes renames and deletions in the directory durable (where directories can be opened). */
  private async syncDir(): Promise<void> {
    if (process.platform === 'win32') {
      return;
    }
    const directory = await open(this.dir, 'r');
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
  }
}

async function writeSynced(path: string, text: string): Promise<void> {
  const file = await open(path, 'w');
  try {
    await file.writeFile(text, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
}

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null
    ? (error as { code?: unknown }).code
    : undefined;
}
