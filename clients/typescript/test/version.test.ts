/** The `User-Agent` names the package as `package.json` does, so the two cannot drift apart. */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { USER_AGENT } from '../src/version.js';

test("the User-Agent is package.json's name/version", () => {
  // Run from .build/test/: the package's root is two levels up.
  const manifest = new URL('../../package.json', import.meta.url);
  const { name, version } = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, string>;
  assert.equal(USER_AGENT, `${name}/${version} (TypeScript)`);
});
