/**
 * How a failing row is retried: the module's `retry` options with every default applied. The same fields as
 * `Required<RetryOptions>`, declared here so that this pure unit depends on nothing (options/ imports shared/, and
 * `resolveRetry` builds the one from the other).
 */
export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  maxAgeMs: number;
}

type Backoff = Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>;

/** The longest wait after the n-th attempt: `baseDelayMs` doubling at each attempt, capped at `maxDelayMs`. */
function ceilingMs(attempt: number, policy: Backoff): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
}

/**
 * Exponential backoff with equal jitter: after the n-th attempt a delay drawn uniformly from the upper half of its
 * ceiling, so that a burst of failures does not come back as a burst, and yet half of every delay is certain: a
 * number of attempts spans a time that can be known in advance (see `guaranteedSpanMs`).
 */
export function backoffDelayMs(attempt: number, policy: Backoff, random: () => number): number {
  const ceiling = ceilingMs(attempt, policy);
  return Math.floor(ceiling / 2 + random() * (ceiling / 2));
}

/** The least time from the first to the last of `attempts` attempts: every delay at its shortest. */
export function guaranteedSpanMs(attempts: number, policy: Backoff): number {
  let span = 0;
  for (let attempt = 1; attempt < attempts; attempt++) span += Math.floor(ceilingMs(attempt, policy) / 2);
  return span;
}

/**
 * The fewest attempts whose delays, at their shortest, reach `maxAgeMs`: so many that a row failing at every
 * attempt (a long outage, a greylisting server) is dead-lettered by its age limit, not by running out of attempts.
 */
export function attemptsToSpan(policy: Omit<RetryPolicy, 'maxAttempts'>): number {
  let attempts = 1;
  let span = 0;
  while (span < policy.maxAgeMs) span += Math.floor(ceilingMs(attempts++, policy) / 2);
  return attempts;
}

export type RetryDecision = { retry: true; nextAttemptAt: Date } | { retry: false; reason: 'attempts' | 'age' };

/**
 * Whether a transiently failed row gets another attempt, and when. `countsAsAttempt` is false for a lane outage:
 * those never use up the row's attempts, only its age. The last retry is pulled in to the age limit rather than
 * dropped, so that a row always gets the attempts its age allows.
 */
export function decideRetry(
  row: { attempts: number; maxAttempts: number; ageFrom: Date },
  countsAsAttempt: boolean,
  policy: RetryPolicy,
  now: Date,
  random: () => number,
): RetryDecision {
  // Age first: the attempts are sized to outlast it, so a row out of both ran out of time.
  const deadline = row.ageFrom.getTime() + policy.maxAgeMs;
  if (now.getTime() >= deadline) {
    return { retry: false, reason: 'age' };
  }
  if (countsAsAttempt && row.attempts >= row.maxAttempts) {
    return { retry: false, reason: 'attempts' };
  }
  const delay = backoffDelayMs(Math.max(1, row.attempts), policy, random);
  return { retry: true, nextAttemptAt: new Date(Math.min(now.getTime() + delay, deadline)) };
}
