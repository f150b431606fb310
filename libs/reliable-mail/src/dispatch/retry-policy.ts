import type { RetryPolicy } from '../options/resolve-options.js';

/**
 * Exponential backoff with full jitter: a delay drawn uniformly from [0, min(maxDelayMs, baseDelayMs * 2^(n-1)))
 * after the n-th attempt, so that a burst of failures does not come back as a burst.
 */
export function backoffDelayMs(
  attempt: number,
  policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>,
  random: () => number,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

export type RetryDecision = { retry: true; nextAttemptAt: Date } | { retry: false; reason: 'attempts' | 'age' };

/**
 * Whether a transiently failed row gets another attempt, and when. `countsAsAttempt` is false for the sender's
 * faults: those never use up the row's attempts, only its age. The last retry is pulled in to the age limit
 * rather than dropped, so that a row always gets the attempts its age allows.
 */
export function decideRetry(
  row: { attempts: number; maxAttempts: number; ageFrom: Date },
  countsAsAttempt: boolean,
  policy: RetryPolicy,
  now: Date,
  random: () => number,
): RetryDecision {
  if (countsAsAttempt && row.attempts >= row.maxAttempts) {
    return { retry: false, reason: 'attempts' };
  }
  const deadline = row.ageFrom.getTime() + policy.maxAgeMs;
  if (now.getTime() >= deadline) {
    return { retry: false, reason: 'age' };
  }
  const delay = backoffDelayMs(Math.max(1, row.attempts), policy, random);
  return { retry: true, nextAttemptAt: new Date(Math.min(now.getTime() + delay, deadline)) };
}
