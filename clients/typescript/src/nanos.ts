/**
 * Durations as whole nanoseconds, the way Rust's `std::time::Duration` holds them. The rules
 * (`progress.ts`) do their arithmetic here so that every wait and every "would this wait cross
 * the deadline?" comes out exactly as in `shared::retry`, down to the nanosecond, rather than
 * nearly so in floating-point milliseconds. The public API speaks milliseconds; only the rules'
 * arithmetic passes through this module.
 */

/** A duration in whole nanoseconds (never negative). */
export type Nanos = bigint;

const NANOS_PER_MILLI = 1_000_000n;
const NANOS_PER_SECOND = 1_000_000_000n;

/** `ms` milliseconds (finite, not negative), to the nearest nanosecond. */
export function nanosFromMillis(ms: number): Nanos {
  return Number.isInteger(ms) ? BigInt(ms) * NANOS_PER_MILLI : BigInt(Math.round(ms * 1e6));
}

/** `duration` in milliseconds. */
export function millisFromNanos(duration: Nanos): number {
  return Number(duration / NANOS_PER_MILLI) + Number(duration % NANOS_PER_MILLI) / 1e6;
}

/** `duration` in whole seconds, rounded down. */
export function wholeSecondsOf(duration: Nanos): number {
  return Number(duration / NANOS_PER_SECOND);
}

/** The larger of two durations. */
export function longer(a: Nanos, b: Nanos): Nanos {
  return a > b ? a : b;
}

/** The shorter of two durations. */
export function shorter(a: Nanos, b: Nanos): Nanos {
  return a < b ? a : b;
}

/**
 * Rust's `Duration::mul_f64`: `factor` (finite, not negative) times `duration`, computed as
 * `Duration::from_secs_f64(factor * duration.as_secs_f64())`.
 */
export function multiplied(duration: Nanos, factor: number): Nanos {
  const seconds = Number(duration / NANOS_PER_SECOND) + Number(duration % NANOS_PER_SECOND) / 1e9;
  return nanosFromSecondsFloat(factor * seconds);
}

/**
 * Rust's `Duration::from_secs_f64`: the exact value of the double `seconds`, rounded to the
 * nearest nanosecond, ties to even. The double is taken apart into its integer mantissa and
 * binary exponent so that no step rounds twice.
 */
function nanosFromSecondsFloat(seconds: number): Nanos {
  const bits = new DataView(new ArrayBuffer(8));
  bits.setFloat64(0, seconds);
  const high = bits.getUint32(0);
  const biasedExponent = (high >>> 20) & 0x7ff;
  let mantissa = (BigInt(high & 0xfffff) << 32n) | BigInt(bits.getUint32(4));
  if (biasedExponent !== 0) {
    mantissa |= 1n << 52n;
  }
  // seconds = mantissa · 2^exponent
  const exponent = Math.max(biasedExponent, 1) - 1075;
  const scaled = mantissa * NANOS_PER_SECOND;
  if (exponent >= 0) {
    return scaled << BigInt(exponent);
  }
  const shift = BigInt(-exponent);
  const whole = scaled >> shift;
  const remainder = scaled - (whole << shift);
  const half = 1n << (shift - 1n);
  const roundsUp = remainder > half || (remainder === half && (whole & 1n) === 1n);
  return roundsUp ? whole + 1n : whole;
}
