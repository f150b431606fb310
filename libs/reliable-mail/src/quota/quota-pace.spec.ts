import { describe, expect, it } from '@jest/globals';
import { paceFor } from './quota-pace.js';

describe('paceFor', () => {
  it.each([
    // SES's sandbox, and its default in production.
    { perSecond: 1, burst: 2, windowLimit: 1, windowMs: 1_050 },
    { perSecond: 14, burst: 2, windowLimit: 14, windowMs: 1_050 },
    { perSecond: 20, burst: 2, windowLimit: 20, windowMs: 1_050 },
    { perSecond: 41, burst: 3, windowLimit: 41, windowMs: 1_050 },
    { perSecond: 500, burst: 25, windowLimit: 500, windowMs: 1_050 },
    // A fraction of a send a second rounds down over a second: no second holds 15.
    { perSecond: 14.5, burst: 2, windowLimit: 14, windowMs: 1_050 },
    { perSecond: 0.5, burst: 2, windowLimit: 1, windowMs: 2_050 },
  ])('$perSecond a second: at most $windowLimit in $windowMs ms, $burst at once', ({ perSecond, ...pace }) => {
    expect(paceFor(perSecond)).toEqual({ ...pace, refillPerSecond: perSecond });
  });

  it.each([1, 14, 20, 137, 500, 5_000])(
    'at %d a second, no window of a second holds more, and 95 % of it is kept',
    (perSecond) => {
      const { windowLimit, windowMs } = paceFor(perSecond);
      expect(windowMs).toBeGreaterThanOrEqual(1_000);
      expect(windowLimit).toBeLessThanOrEqual(perSecond);
      expect((windowLimit * 1_000) / windowMs).toBeGreaterThanOrEqual(0.95 * perSecond);
    },
  );
});
