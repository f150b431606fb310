import { InvalidOptionsError } from '../errors.js';

/** An integer of at least `minimum`, or an `InvalidOptionsError` naming the option. */
export function requirePositiveInteger(option: string, value: unknown, minimum = 1): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
    throw new InvalidOptionsError(option, `must be an integer >= ${minimum}, got ${JSON.stringify(value)}`);
  }
  return value;
}
