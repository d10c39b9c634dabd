/** The default jitter source: 53 bits of `crypto.getRandomValues`, else `Math.random`. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { defaultRandom, randomFrom } from '../src/random.js';

function fixed(high: number, low: number) {
  return randomFrom((words) => {
    words[0] = high;
    words[1] = low;
  });
}

test('53 bits map onto [0, 1): all zero bits give 0, all one bits the largest double below 1', () => {
  assert.equal(fixed(0, 0)(), 0);
  assert.equal(fixed(0xffffffff, 0xffffffff)(), 1 - 2 ** -53);
  assert.equal(fixed(0x80000000, 0)(), 0.5);
  // The lowest bit kept of each word: 2⁻²⁷ from the first, 2⁻⁵³ from the second.
  assert.equal(fixed(1 << 5, 0)(), 2 ** -27);
  assert.equal(fixed(0, 1 << 6)(), 2 ** -53);
  // Bits below those are dropped.
  assert.equal(fixed(0x1f, 0x3f)(), 0);
});

test('the default source uses crypto.getRandomValues when the platform has it', () => {
  const crypto = globalThis.crypto;
  const original = crypto.getRandomValues;
  let calls = 0;
  crypto.getRandomValues = ((array: Uint32Array) => {
    calls += 1;
    array.fill(0xffffffff);
    return array;
  }) as typeof crypto.getRandomValues;
  try {
    const random = defaultRandom();
    assert.equal(random(), 1 - 2 ** -53);
    assert.equal(calls, 1);
  } finally {
    crypto.getRandomValues = original;
  }
  const random = defaultRandom();
  for (let draw = 0; draw < 1000; draw += 1) {
    const unit = random();
    assert.ok(unit >= 0 && unit < 1, String(unit));
  }
});

test('without crypto.getRandomValues the default source is Math.random', () => {
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'crypto');
  Object.defineProperty(globalThis, 'crypto', { value: undefined, configurable: true });
  try {
    assert.equal(defaultRandom(), Math.random);
  } finally {
    Object.defineProperty(globalThis, 'crypto', descriptor ?? { value: undefined });
  }
});
