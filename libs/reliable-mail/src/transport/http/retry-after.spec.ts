import { describe, expect, it } from '@jest/globals';
import { LONGEST_RETRY_AFTER_MS, retryAfterMs } from './retry-after.js';

const now = Date.parse('2026-12-01T12:00:00Z');

describe('retryAfterMs: the wait a Retry-After header asks for', () => {
  it.each([
    { header: undefined, expected: undefined },
    { header: null, expected: undefined },
    { header: '', expected: undefined },
    { header: '3', expected: 3_000 },
    { header: ' 3 ', expected: 3_000 },
    { header: '0', expected: 0 },
    { header: '1.5', expected: 1_500 },
    { header: 'Tue, 01 Dec 2026 12:00:05 GMT', expected: 5_000 },
    { header: 'Tue, 01 Dec 2026 11:59:00 GMT', expected: 0 },
    { header: '86400', expected: LONGEST_RETRY_AFTER_MS },
    { header: '-3', expected: undefined },
    { header: 'soon', expected: undefined },
    { header: '2026-12-01T12:00:05Z', expected: undefined },
    { header: '1e3', expected: undefined },
  ])('$header: $expected', ({ header, expected }) => {
    expect(retryAfterMs(header, now)).toBe(expected);
  });
});
