/** Bytes as lower-case hex, two digits a byte: the form keys and trace ids are written in. */

/** `bytes` as lower-case hex, two digits each. */
export function lowerHex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}
