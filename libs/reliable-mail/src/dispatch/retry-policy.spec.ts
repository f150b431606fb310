import { describe, expect, it } from '@jest/globals';
import type { RetryPolicy } from '../options/resolve-options.js';
import { backoffDelayMs, decideRetry, type RetryDecision } from './retry-policy.js';

const policy: RetryPolicy = { maxAttempts: 8, baseDelayMs: 1_000, maxDelayMs: 60_000, maxAgeMs: 86_400_000 };
const now = new Date('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);

describe('backoffDelayMs', () => {
  it.each([
    { name: 'random 0 gives no delay', attempt: 1, random: 0, expected: 0 },
    { name: 'random 0.999 stays just under the first ceiling', attempt: 1, random: 0.999, expected: 999 },
    { name: 'attempt 1 draws from [0, base)', attempt: 1, random: 0.5, expected: 500 },
    { name: 'attempt 2 doubles the ceiling', attempt: 2, random: 0.5, expected: 1_000 },
    { name: 'attempt 3 doubles it again', attempt: 3, random: 0.5, expected: 2_000 },
    { name: 'attempt 6 reaches 2^5 times base', attempt: 6, random: 0.5, expected: 16_000 },
    { name: 'attempt 7 (64 s) is capped at maxDelayMs', attempt: 7, random: 0.5, expected: 30_000 },
    { name: 'attempt 30 stays capped', attempt: 30, random: 0.999, expected: 59_940 },
    { name: 'attempt 0 is treated like attempt 1', attempt: 0, random: 0.5, expected: 500 },
  ])('$name', ({ attempt, random, expected }) => {
    expect(backoffDelayMs(attempt, policy, () => random)).toBe(expected);
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
      expected: { retry: true, nextAttemptAt: at(2_000) },
    },
    {
      name: 'no attempt recorded yet uses the first ceiling',
      attempts: 0,
      ageMs: 0,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: true, nextAttemptAt: at(500) },
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
      name: 'attempts are checked before age',
      attempts: 5,
      ageMs: 90_000_000,
      countsAsAttempt: true,
      random: 0.5,
      expected: { retry: false, reason: 'attempts' },
    },
    {
      name: 'sender fault ignores exhausted attempts',
      attempts: 5,
      ageMs: 60_000,
      countsAsAttempt: false,
      random: 0.5,
      expected: { retry: true, nextAttemptAt: at(8_000) },
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
      name: 'sender fault past maxAgeMs',
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
      expected: { retry: true, nextAttemptAt: at(7_992) },
    },
  ])('$name', ({ attempts, ageMs, countsAsAttempt, random, expected }) => {
    const row = { attempts, maxAttempts: 5, ageFrom: at(-ageMs) };
    expect(decideRetry(row, countsAsAttempt, policy, now, () => random)).toEqual(expected);
  });
});
