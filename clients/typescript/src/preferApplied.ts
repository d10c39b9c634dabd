/**
 * `Preference-Applied: wait=N` on a reply: the server held the request up to N seconds for
 * the key's first attempt (SPEC §4). Read as `wait_in` in `shared/src/prefer.rs` reads it:
 * comma-separated preferences (commas inside quoted strings do not split), parameters after
 * `;` ignored, the name case-insensitive, the value digits or a quoted string of digits; the
 * first `wait` counts, and an unreadable or zero one means none.
 */

/** The wait named in a `Preference-Applied` header value, in whole seconds, or `null`. */
export function appliedWaitSeconds(headerValue: string | null): number | null {
  if (headerValue === null) {
    return null;
  }
  for (const preference of splitOutsideQuotes(headerValue)) {
    const nameAndValue = preference.split(';')[0] ?? '';
    const equals = nameAndValue.indexOf('=');
    const name = (equals < 0 ? nameAndValue : nameAndValue.slice(0, equals)).trim();
    if (name.toLowerCase() !== 'wait') {
      continue;
    }
    const raw = equals < 0 ? '' : nameAndValue.slice(equals + 1).trim();
    const value =
      raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
    const seconds = /^[0-9]+$/.test(value) ? Number(value) : 0;
    return seconds > 0 ? seconds : null;
  }
  return null;
}

/** `value` split at the commas that are not inside a quoted string. */
function splitOutsideQuotes(value: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  let escaped = false;
  for (let at = 0; at < value.length; at += 1) {
    const character = value.charAt(at);
    if (escaped) {
      escaped = false;
    } else if (character === '\\' && quoted) {
      escaped = true;
    } else if (character === '"') {
      quoted = !quoted;
    } else if (character === ',' && !quoted) {
      parts.push(value.slice(start, at));
      start = at + 1;
    }
  }
  parts.push(value.slice(start));
  return parts;
}
