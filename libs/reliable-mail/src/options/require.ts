import { InvalidOptionsError } from '../errors.js';

/** An integer of at least `minimum`, or an `InvalidOptionsError` naming the option. */
export function requirePositiveInteger(option: string, value: unknown, minimum = 1): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
    throw new InvalidOptionsError(option, `must be an integer >= ${minimum}, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** A domain name, as `messageIdDomain` and `verp.domain` must be. */
export const HOSTNAME_PATTERN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;
