import { InvalidOptionsError } from '../errors.js';
import { attemptsToSpan, guaranteedSpanMs, type RetryPolicy } from '../shared/retry-policy.js';
import type { RetryOptions } from './reliable-mail-options.interface.js';
import { requirePositiveInteger, requireSpan } from './require.js';
import { withDefaults } from './with-defaults.js';

/** `maxAttempts` defaults to as many attempts as the delays need to reach `maxAgeMs` (see `attemptsToSpan`). */
const DEFAULT_RETRY_OPTIONS: Omit<Required<RetryOptions>, 'maxAttempts'> = {
  baseDelayMs: 5_000,
  maxDelayMs: 3_600_000,
  maxAgeMs: 86_400_000,
};

/** Every row stores its `maxAttempts` in an int column (PostgreSQL's 4-byte integer). */
const MAX_ATTEMPTS = 2_147_483_647;

/**
 * The retry policy. The attempts must last as long as `maxAgeMs` at their shortest delays: otherwise an outage
 * shorter than the age limit (or a greylisting server) would dead-letter mail by running out of attempts.
 */
export function resolveRetry(options: RetryOptions = {}): RetryPolicy {
  const delays = withDefaults(DEFAULT_RETRY_OPTIONS, options);
  for (const key of ['baseDelayMs', 'maxDelayMs', 'maxAgeMs'] as const) requireSpan(`retry.${key}`, delays[key]);
  if (delays.maxDelayMs < delays.baseDelayMs) {
    throw new InvalidOptionsError('retry.maxDelayMs', `must be >= retry.baseDelayMs (${delays.baseDelayMs})`);
  }
  const needed = attemptsToSpan(delays);
  if (options.maxAttempts === undefined) return { ...delays, maxAttempts: needed };
  const maxAttempts = requirePositiveInteger('retry.maxAttempts', options.maxAttempts);
  if (maxAttempts > MAX_ATTEMPTS) {
    throw new InvalidOptionsError(
      'retry.maxAttempts',
      `must be at most ${MAX_ATTEMPTS}, the largest value of the row's int column: every enqueue would fail, ` +
        `aborting its caller's transaction, got ${maxAttempts}`,
    );
  }
  const span = guaranteedSpanMs(maxAttempts, delays);
  if (span < delays.maxAgeMs) {
    throw new InvalidOptionsError(
      'retry.maxAttempts',
      `${maxAttempts} attempts, waiting from ${delays.baseDelayMs} ms doubling up to ${delays.maxDelayMs} ms, may all be spent ` +
        `in ${span} ms, before retry.maxAgeMs (${delays.maxAgeMs} ms): a shorter outage could dead-letter mail. ` +
        `Allow at least ${needed} attempts (the default), or lower retry.maxAgeMs`,
    );
  }
  return { ...delays, maxAttempts };
}
