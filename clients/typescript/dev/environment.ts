/**
 * What the package's development programs share (the stack tests of `test-stack/`, the incident
 * replay's phone in `tools/`): settings read from the environment their caller sets, and
 * development tokens signed with the stack's shared secret, as `backend dev-token` signs them
 * (HS256, `sub` the user id, an hour's `exp`).
 */

import { createHmac } from 'node:crypto';

/** The environment variable `name`, which must be set. */
export function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the caller sets it: edge/tests/typescript_client.rs, the incident replay)`);
  return value;
}

/** A token for `user`, signed with `AUTH_JWT_SECRET`. */
export function signToken(user: string): string {
  const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const unsigned = `${encode({ alg: 'HS256', typ: 'JWT' })}.${encode({ sub: user, exp })}`;
  const signature = createHmac('sha256', setting('AUTH_JWT_SECRET')).update(unsigned).digest('base64url');
  return `${unsigned}.${signature}`;
}
