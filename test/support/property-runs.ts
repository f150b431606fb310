import type { Parameters } from 'fast-check';

/** The least number of runs of every property test: hostile input is found by volume. */
export const PROPERTY_RUNS = 1_000;

/**
 * fast-check's parameters for one property: at least `PROPERTY_RUNS` runs, and a seed that is printed before the
 * property runs, so that a failure seen once (in CI, say) can be run again with `FC_SEED=<seed> npm test`.
 */
export function propertyRuns<T>(property: string, numRuns = PROPERTY_RUNS): Parameters<T> {
  const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  process.stdout.write(`property "${property}": ${numRuns} runs, seed ${seed}\n`);
  return { numRuns: Math.max(numRuns, PROPERTY_RUNS), seed };
}
