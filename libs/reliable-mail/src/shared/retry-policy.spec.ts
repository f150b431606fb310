import { describe, expect, it } from '@jest/globals';
import {
  attemptsToSpan,
  backoffDelayMs,
  decideRetry,
  guaranteedSpanMs,
  type RetryDecision,
  type RetryPolicy,
} from './retry-policy.js';

const policy: RetryPolicy = { maxAttempts: 8, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const now = new Date('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);

describe('backoffDelayMs (equal jitter: the upper half of a doubling ceiling)', () => {
  it.each([
    { name: 'random 0 gives half the first ceiling', attempt: 1, random: 0, expected: 500 },
    { name: 'random 0.999 stays just under the first ceiling', attempt: 1, random: 0.999, expected: 999 },
    { name: 'attempt 1 draws from [base/2, base)', attempt: 1, random: 0.5, expected: 750 },
    { name: 'attempt 2 doubles the ceiling', attempt: 2, random: 0.5, expected: 1_500 },
    { name: 'attempt 3 doubles it again', attempt: 3, random: 0.5, expected: 3_000 },
    { name: 'attempt 6 reaches 2^5 times base', attempt: 6, random: 0.5, expected: 24_000 },
    { name: 'attempt 7 (64 s) is capped at maxDelayMs', attempt: 7, random: 0.5, expected: 45_000 },
    { name: 'attempt 30 stays capped', attempt: 30, random: 0.999, expected: 59_970 },
    { name: 'attempt 0 is treated like attempt 1', attempt: 0, random: 0.5, expected: 750 },
  ])('$name', ({ attempt, random, expected }) => {
    expect(backoffDelayMs(attempt, policy, () => random)).toBe(expected);
  });
});

describe('guaranteedSpanMs and attemptsToSpan', () => {
  it.each([
    { attempts: 1, expected: 0 },
    { attempts: 2, expected: 500 },
    { attempts: 4, expected: 500 + 1_000 + 2_000 },
    { attempts: 9, expected: 500 + 1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 30_000 + 30_000 },
  ])('$attempts attempts take at least $expected ms', ({ attempts, expected }) => {
    expect(guaranteedSpanMs(attempts, policy)).toBe(expected);
  });

  it('attemptsToSpan is the fewest attempts whose shortest delays reach maxAgeMs', () => {
    const shortAge = { ...policy, maxAgeMs: 90_000 };
    const attempts = attemptsToSpan(shortAge);
    expect(guaranteedSpanMs(attempts, shortAge)).toBeGreaterThanOrEqual(90_000);
    expect(guaranteedSpanMs(attempts - 1, shortAge)).toBeLessThan(90_000);
  });
});

/** The defaults of `retry`, as resolveOptions gives them. */
const defaults = { baseDelayMs: 5_000, maxDelayMs: 3_600_000, maxAgeMs: 86_400_000 };
const defaultPolicy: RetryPolicy = { ...defaults, maxAttempts: attemptsToSpan(defaults) };

/**
 * Sends a row that fails every attempt until `recoversAfterMs`, on an injected clock: the time of the attempt that
 * succeeded, or the reason it was dead-lettered first.
 */
function simulate(recoversAfterMs: number, random: () => number): { deliveredAt: number } | { dead: string } {
  const start = new Date('2026-12-01T00:00:00.000Z');
  let clock = start.getTime();
  for (let attempts = 1; ; attempts++) {
    if (clock - start.getTime() >= recoversAfterMs) return { deliveredAt: clock - start.getTime() };
    const decision = decideRetry(
      { attempts, maxAttempts: defaultPolicy.maxAttempts, ageFrom: start },
      true,
      defaultPolicy,
      new Date(clock),
      random,
    );
    if (!decision.retry) return { dead: decision.reason };
    clock = decision.nextAttemptAt.getTime();
  }
}

describe('the default retry policy carries a mail through', () => {
  it.each([
    { name: 'a 30-minute outage, at the shortest delays', recoversAfterMs: 30 * 60_000, random: 0 },
    { name: 'a 30-minute outage, at the longest delays', recoversAfterMs: 30 * 60_000, random: 0.999 },
    { name: 'greylisting that lets it through after 15 minutes', recoversAfterMs: 15 * 60_000, random: 0.5 },
    { name: 'a 23-hour outage, at the shortest delays', recoversAfterMs: 23 * 3_600_000, random: 0 },
  ])('$name: delivered, not dead', ({ recoversAfterMs, random }) => {
    const outcome = simulate(recoversAfterMs, () => random);
    expect(outcome).toHaveProperty('deliveredAt');
    // Not much later than the server was back: at most one delay of the schedule.
    expect((outcome as { deliveredAt: number }).deliveredAt).toBeLessThan(recoversAfterMs + defaults.maxDelayMs);
  });

  it('an outage longer than maxAgeMs dead-letters it by its age, never by its attempts', () => {
    expect(simulate(48 * 3_600_000, () => 0)).toEqual({ dead: 'age' });
    expect(simulate(48 * 3_600_000, () => 0.999)).toEqual({ dead: 'age' });
  });
});

describe('decideRetry', () => {
  it.each<{
    name: string;
    attempts: number;
    ageMs: number;
    countsAsAttempt: boolean;
    random: number;
    expected: RetryDecision;
  }>([
    {
      name: 'attempts left: backoff from now',
      attempts: 3,
      ageMs: 60_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: true, nextAttemptAt: at(3_000) },
    },
    {
      name: 'no attempt recorded yet uses the first ceiling',
      attempts: 0,
      ageMs: 0,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: true, nextAttemptAt: at(750) },
    },
    {
      name: 'attempts exhausted',
      attempts: 5,
      ageMs: 60_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'attempts' },
    },
    {
      name: 'attempts beyond the maximum',
      attempts: 6,
      ageMs: 60_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'attempts' },
    },
    {
      name: 'age is checked before attempts',
      attempts: 5,
      ageMs: 90_000_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'age' },
    },
    {
      name: 'a lane outage ignores exhausted attempts',
      attempts: 5,
      ageMs: 60_000,
      countsAsAttempt: false,
      random: 0.5,
      expected: { retry: true, nextAttemptAt: at(12_000) },
    },
    {
      name: 'age exactly at maxAgeMs',
      attempts: 1,
      ageMs: 86_400_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'age' },
    },
    {
      name: 'age past maxAgeMs',
      attempts: 1,
      ageMs: 86_400_001,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'age' },
    },
    {
      name: 'a lane outage past maxAgeMs',
      attempts: 1,
      ageMs: 90_000_000,
      countsAsAttempt: false,
      random: 0.5,
      expected: { retry: false, reason: 'age' },
    },
    {
      name: 'next attempt pulled in to the age deadline',
      attempts: 4,
      ageMs: 86_399_000,
      countsAsAttempt: true,
      random: 0.999,
      expected: { retry: true, nextAttemptAt: at(1_000) },
    },
    {
      name: 'next attempt before the deadline is kept',
      attempts: 4,
      ageMs: 86_300_000,
      countsAsAttempt: true,
      random: 0.999,
      expected: { retry: true, nextAttemptAt: at(7_996) },
    },
  ])('$name', ({ attempts, ageMs, countsAsAttempt, random, expected }) => {
    const row = { attempts, maxAttempts: 5, ageFrom: at(-ageMs) };
    expect(decideRetry(row, countsAsAttempt, policy, now, () => random)).toEqual(expected);
  });
});
