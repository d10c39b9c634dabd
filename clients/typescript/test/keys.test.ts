/**
 * The default key: `crypto.randomUUID` when the platform has it, else a version 4 UUID from 16
 * bytes of `crypto.getRandomValues` (React Native on Hermes), else an error saying what to do.
 */

import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import { test } from 'node:test';

import { type KeyCrypto, randomKey, uuidV4FromBytes } from '../src/keys.js';

/** Lower-case 8-4-4-4-12 hex, version 4, variant `10xx` (8, 9, a or b). */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Web Crypto as Hermes has it with react-native-get-random-values: no `randomUUID`. */
const getRandomValuesOnly: KeyCrypto = {
  getRandomValues: (array) => webcrypto.getRandomValues(array),
};

test('without crypto.randomUUID, 10,000 keys from getRandomValues are distinct version 4 UUIDs', () => {
  const keys = new Set<string>();
  for (let draw = 0; draw < 10_000; draw += 1) {
    const key = randomKey(getRandomValuesOnly);
    assert.match(key, UUID_V4);
    keys.add(key);
  }
  assert.equal(keys.size, 10_000);
});

test('a UUID from 16 bytes sets only the version nibble and the variant bits', () => {
  assert.equal(uuidV4FromBytes(new Uint8Array(16)), '00000000-0000-4000-8000-000000000000');
  assert.equal(
    uuidV4FromBytes(new Uint8Array(16).fill(0xff)),
    'ffffffff-ffff-4fff-bfff-ffffffffffff',
  );
  const ascending = Uint8Array.from({ length: 16 }, (_, index) => index * 0x11);
  assert.equal(uuidV4FromBytes(ascending), '00112233-4455-4677-8899-aabbccddeeff');
  assert.equal(ascending[6], 0x66, 'the bytes given are not changed');
  assert.throws(() => uuidV4FromBytes(new Uint8Array(15)), RangeError);
});

test('crypto.randomUUID makes the key when the platform has it', () => {
  let filled = 0;
  const both: KeyCrypto = {
    randomUUID: () => 'from-random-uuid',
    getRandomValues: () => (filled += 1),
  };
  assert.equal(randomKey(both), 'from-random-uuid');
  assert.equal(filled, 0);
});

test('with neither randomUUID nor getRandomValues, the error says what to install or inject', () => {
  for (const crypto of [undefined, {}]) {
    assert.throws(
      () => randomKey(crypto),
      (error: unknown) => {
        assert.ok(error instanceof Error);
        assert.match(error.message, /neither crypto\.randomUUID nor crypto\.getRandomValues/);
        assert.match(error.message, /install react-native-get-random-values/);
        assert.match(error.message, /options\.mintKey/);
        return true;
      },
    );
  }
});
