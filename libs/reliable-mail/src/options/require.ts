import { InvalidOptionsError } from '../errors.js';

/**
 * The largest count or duration most options take: PostgreSQL's int, and the longest delay Node's timers keep (a
 * longer one fires after 1 ms: a send deadline of 30 days would abort every send at once). 24.8 days in ms.
 */
export const LARGEST_OPTION = 2_147_483_647;

/**
 * The longest span an option that is no timer may give (a retry delay or age, how long rows are kept, a health
 * window): 100 years, so that a date it is added to stays within the years PostgreSQL stores.
 */
export const LONGEST_SPAN_MS = 100 * 365.25 * 86_400_000;

/** An integer from `minimum` to `maximum`, or an `InvalidOptionsError` naming the option. */
export function requirePositiveInteger(option: string, value: unknown, minimum = 1, maximum = LARGEST_OPTION): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum || value > maximum) {
    throw new InvalidOptionsError(
      option,
      `must be an integer from ${minimum} to ${maximum}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** A span in ms that is no timer (see `LONGEST_SPAN_MS`), from 1 ms. */
export const requireSpan = (option: string, value: unknown): number =>
  requirePositiveInteger(option, value, 1, LONGEST_SPAN_MS);

/** What a PostgreSQL connection URL begins with, as `database.url` and `database.listenUrl` must. */
export const POSTGRES_URL = /^postgres(ql)?:\/\//;

/** A domain name, as `messageIdDomain` and `verp.domain` must be. */
export const HOSTNAME_PATTERN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/** 128 bits of a random string's worth: what `openssl rand -base64 32` gives is 44 characters. */
const MIN_SECRET_LENGTH = 32;

/**
 * An HMAC secret, or `[old, new]` while one replaces another (each 32 characters or more); `protects` says what the
 * HMAC keeps anyone from forging, for the error.
 */
export function requireSecrets(option: string, value: unknown, protects: string): string[] {
  const secrets = [value].flat();
  if (
    secrets.length === 0 ||
    !secrets.every((secret) => typeof secret === 'string' && secret.length >= MIN_SECRET_LENGTH)
  ) {
    throw new InvalidOptionsError(
      option,
      `must be a secret of at least ${MIN_SECRET_LENGTH} characters (such as the output of \`openssl rand -base64 32\`), ` +
        `or [old, new] while one replaces another: ${protects}`,
    );
  }
  return secrets as string[];
}
