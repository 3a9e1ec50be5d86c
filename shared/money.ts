/**
 * Money is integer micro-dollars in storage and arithmetic; USD numbers exist only at the API edge.
 */
export const MICROS_PER_USD = 1_000_000;

export function usdToMicros(usd: number): number {
  const micros = Math.round(usd * MICROS_PER_USD);
  if (!Number.isSafeInteger(micros)) throw new RangeError(`amount out of range: ${usd}`);
  return micros;
}

export function microsToUsd(micros: number | bigint | string): number {
  return Number(micros) / MICROS_PER_USD;
}
