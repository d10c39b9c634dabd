/**
 * Every action store: what is saved reads back identical (through a new store handle, as after
 * a restart), oldest first; removing is idempotent; entries that are not actions are reported,
 * not skipped; and the file store writes atomically and leaves no temporary file behind.
 */

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import {
  type ActionStore,
  AsyncStorageStore,
  DEFAULT_PREFIX,
  FileStore,
  MemoryStore,
  type SavedAction,
  StoreError,
  WebStorageStore,
} from '../src/node.js';
import { MemoryAsyncStorage, MemoryWebStorage } from './support/fakes.js';

function action(key: string, startedAtMs: number): SavedAction {
  return {
    version: 1,
    key,
    userId: '7',
    operation: 'pay_bill',
    target: 'elec-1',
    path: '/v1/bills/elec-1/pay',
    body: '{"amount_paise":230000,"payer_vpa":"asha@okbank"}',
    startedAtMs,
  };
}

const NEWER = action('6f1c1c1e-7d2a-4c55-9a0e-2f4a8b1c9d01', 1_800_000_000_000);
const OLDER = action('1b7e4f8a-3c2d-4e1f-8a9b-7c6d5e4f3a2b', 1_700_000_000_000);

/** An adapter under test: `open` gives a new handle on the same storage, as after a restart. */
interface Adapter {
  readonly name: string;
  open(): ActionStore | Promise<ActionStore>;
  /** Puts an entry that is not a saved action where the store will find it. */
  corrupt(): Promise<void> | void;
}

const temporaryDirs: string[] = [];
after(async () => {
  await Promise.all(temporaryDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function newDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'payments-client-'));
  temporaryDirs.push(dir);
  return dir;
}

function adapters(): Adapter[] {
  const asyncStorage = new MemoryAsyncStorage();
  const webStorage = new MemoryWebStorage();
  const memory = new MemoryStore();
  let dir: Promise<string> | undefined;
  const fileDir = () => (dir ??= newDir());
  return [
    { name: 'MemoryStore', open: () => memory, corrupt: () => undefined },
    {
      name: 'AsyncStorageStore',
      open: () => new AsyncStorageStore(asyncStorage),
      corrupt: () => asyncStorage.setItem(`${DEFAULT_PREFIX}edited`, '{"version": 1, "key": 5}'),
    },
    {
      name: 'WebStorageStore',
      open: () => new WebStorageStore(webStorage),
      corrupt: () => webStorage.setItem(`${DEFAULT_PREFIX}edited`, 'not json'),
    },
    {
      name: 'FileStore',
      open: async () => new FileStore(join(await fileDir(), 'actions')),
      corrupt: async () => writeFile(join(await fileDir(), 'actions', 'edited.json'), 'not json'),
    },
  ];
}

for (const adapter of adapters()) {
  describe(adapter.name, () => {
    test('saved actions read back identical through a new handle, oldest first', async () => {
      const store = await adapter.open();
      await store.save(NEWER);
      await store.save(OLDER);
      const reopened = await adapter.open();
      assert.deepEqual(await reopened.list(), [OLDER, NEWER]);
    });

    test('removing is idempotent and leaves the other actions', async () => {
      const store = await adapter.open();
      await store.remove(NEWER.key);
      await store.remove(NEWER.key);
      assert.deepEqual(await store.list(), [OLDER]);
      await store.remove(OLDER.key);
      assert.deepEqual(await store.list(), []);
    });

    if (adapter.name !== 'MemoryStore') {
      test('an entry that is not a saved action is reported, not skipped', async () => {
        await adapter.corrupt();
        const store = await adapter.open();
        await assert.rejects(
          store.list(),
          (error: unknown) => error instanceof StoreError && error.operation === 'list',
        );
      });
    }
  });
}

test("the key-value stores list only their own prefix's entries", async () => {
  const asyncStorage = new MemoryAsyncStorage();
  await asyncStorage.setItem('theme', 'dark');
  const webStorage = new MemoryWebStorage();
  webStorage.setItem('theme', 'dark');
  for (const store of [
    new AsyncStorageStore(asyncStorage, 'app/'),
    new WebStorageStore(webStorage, 'app/'),
  ]) {
    await store.save(OLDER);
    assert.deepEqual(await store.list(), [OLDER]);
  }
  assert.equal(asyncStorage.entries.get('theme'), 'dark');
  assert.equal(webStorage.getItem('theme'), 'dark');
});

test('a storage that refuses to write fails the save with a StoreError', async () => {
  const full = new MemoryWebStorage();
  full.setItem = () => {
    throw new Error('QuotaExceededError');
  };
  await assert.rejects(
    new WebStorageStore(full).save(OLDER),
    (error: unknown) =>
      error instanceof StoreError &&
      error.operation === 'save' &&
      /QuotaExceeded/.test(error.message),
  );
});

test('the file store writes one file per action by a temporary file and leaves none behind', async () => {
  const dir = join(await newDir(), 'nested', 'actions');
  const store = new FileStore(dir);
  assert.deepEqual(await store.list(), [], 'a store that was never written is empty');
  await store.save(OLDER);
  await store.save({ ...OLDER, body: '{"amount_paise":1,"payer_vpa":"asha@okbank"}' });
  assert.deepEqual(await readdir(dir), [`${OLDER.key}.json`]);
  const [reread] = await new FileStore(dir).list();
  assert.equal(
    reread?.body,
    '{"amount_paise":1,"payer_vpa":"asha@okbank"}',
    'the second save replaced the first whole',
  );
});

test('a temporary file left by a crash mid-save is not an action', async () => {
  const dir = await newDir();
  await writeFile(join(dir, `.${NEWER.key}.json.tmp`), '{"version": 1, "ke');
  const store = new FileStore(dir);
  await store.save(OLDER);
  assert.deepEqual(await store.list(), [OLDER]);
});

test('the file store refuses a key that is not safe as a file name', async () => {
  const store = new FileStore(await newDir());
  await assert.rejects(store.save({ ...OLDER, key: '../escape' }), StoreError);
});
