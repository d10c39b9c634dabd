/**
 * The shared test vectors (`shared/vectors/client-rules.json`, generated from the Rust rules by
 * `shared/tests/client_vectors.rs`), loaded and typed for the tests that run them.
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { type ClientRules, type Ending, clientRules, keepsAction } from '../../src/index.js';

export interface VectorRules {
  readonly base_ms: number;
  readonly cap_ms: number;
  readonly deadline_ms: number;
  readonly attempt_timeout_ms: number;
  readonly prefer_wait_ms: number | null;
  readonly max_attempts: number;
  readonly status_look_ups: number;
}

export type VectorSeen =
  | { readonly no_reply: true }
  | { readonly status: number; readonly retry_after?: string; readonly body?: string };

export interface VectorStop {
  readonly ending: string;
  readonly status?: number;
  readonly from_look_up?: boolean;
  readonly why?: string;
  readonly keep_action: boolean;
}

export type VectorMove =
  | { readonly send: { readonly after_ms: number; readonly headers: Record<string, string> } }
  | { readonly look_up: { readonly after_ms: number; readonly headers: Record<string, string> } }
  | { readonly stop: VectorStop };

export interface VectorStep {
  readonly seen: VectorSeen;
  readonly at_ms: number;
  readonly unit: number;
  readonly next: VectorMove;
}

export interface VectorCase {
  readonly name: string;
  readonly rules: VectorRules;
  readonly starts_at_ms: number;
  readonly first: VectorMove;
  readonly steps: readonly VectorStep[];
}

export interface Vectors {
  readonly cases: readonly VectorCase[];
  readonly retry_after: readonly { readonly value: string; readonly seconds: number | null }[];
}

// The compiled tests live in .build/test/support/; the package folder is three levels up.
const packageDir = fileURLToPath(new URL('../../../', import.meta.url));

/** Where the vectors are: `shared/vectors/` of the workspace this package sits in. */
export const VECTORS_PATH = `${packageDir}../../shared/vectors/client-rules.json`;

/** The vectors, read from {@link VECTORS_PATH}. */
export const vectors = JSON.parse(readFileSync(VECTORS_PATH, 'utf8')) as Vectors;

/** A case's rules as the package's rules. */
export function rulesOf(rules: VectorRules): ClientRules {
  return clientRules({
    baseMs: rules.base_ms,
    capMs: rules.cap_ms,
    deadlineMs: rules.deadline_ms,
    attemptTimeoutMs: rules.attempt_timeout_ms,
    preferWaitMs: rules.prefer_wait_ms,
    maxAttempts: rules.max_attempts,
    statusLookUps: rules.status_look_ups,
  });
}

/** An ending in the vectors' words. */
export function stopOf(ending: Ending): VectorStop {
  const keep_action = keepsAction(ending);
  switch (ending.kind) {
    case 'replied':
      return {
        ending: 'replied',
        status: ending.status,
        from_look_up: ending.fromLookUp,
        keep_action,
      };
    case 'unsettled':
      return { ending: 'unsettled', why: ending.why, keep_action };
    case 'not_received':
    case 'sign_in_required':
      return { ending: ending.kind, keep_action };
  }
}
