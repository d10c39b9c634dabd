/**
 * `Retry-After`, read as the shared rules read it (`parse_retry_after` in
 * `shared/src/retry/progress.rs`): delta-seconds only (RFC 9110: digits, with spaces and tabs
 * around allowed), capped at {@link LONGEST_RETRY_AFTER_SECONDS}. The HTTP-date form is not
 * used by this API and, like anything else, reads as no value.
 */

/** The longest `Retry-After` taken at its word (about 31 years); a longer value reads as this. */
export const LONGEST_RETRY_AFTER_SECONDS = 999_999_999;

const LONGEST_DIGITS = String(LONGEST_RETRY_AFTER_SECONDS).length;

/** The wait a `Retry-After` value asks for, in milliseconds, or `null` when it is not one. */
export function parseRetryAfter(value: string): number | null {
  const digits = value.replace(/^[ \t]+|[ \t]+$/g, '');
  if (!/^[0-9]+$/.test(digits)) {
    return null;
  }
  // Counted in digits, not converted first: a value of any length caps without losing precision.
  const significant = digits.replace(/^0+(?=[0-9])/, '');
  const seconds =
    significant.length > LONGEST_DIGITS
      ? LONGEST_RETRY_AFTER_SECONDS
      : Math.min(Number(significant), LONGEST_RETRY_AFTER_SECONDS);
  return seconds * 1000;
}
