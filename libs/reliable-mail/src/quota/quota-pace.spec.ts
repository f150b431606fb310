import { describe, expect, it } from '@jest/globals';
import { GRANT_TO_SEND_MS, GrantClock, paceFor } from './quota-pace.js';

describe('paceFor', () => {
  it.each([
    // SES's sandbox, and its default in production.
    { perSecond: 1, burst: 2, windowLimit: 1, windowMs: 1_075 },
    { perSecond: 14, burst: 2, windowLimit: 14, windowMs: 1_075 },
    { perSecond: 20, burst: 2, windowLimit: 20, windowMs: 1_075 },
    { perSecond: 41, burst: 3, windowLimit: 41, windowMs: 1_075 },
    { perSecond: 500, burst: 25, windowLimit: 500, windowMs: 1_075 },
    // A fraction of a send a second rounds down over a second: no second holds 15.
    { perSecond: 14.5, burst: 2, windowLimit: 14, windowMs: 1_075 },
    { perSecond: 0.5, burst: 2, windowLimit: 1, windowMs: 2_075 },
  ])('$perSecond a second: at most $windowLimit in $windowMs ms, $burst at once', ({ perSecond, ...pace }) => {
    expect(paceFor(perSecond)).toEqual({ ...pace, refillPerSecond: perSecond });
  });

  it.each([1, 14, 20, 137, 500, 5_000])(
    'at %d a second, no window of a second holds more, and 93 % of it is kept',
    (perSecond) => {
      const { windowLimit, windowMs } = paceFor(perSecond);
      expect(windowMs).toBeGreaterThanOrEqual(1_000);
      expect(windowLimit).toBeLessThanOrEqual(perSecond);
      expect((windowLimit * 1_000) / windowMs).toBeGreaterThanOrEqual(0.93 * perSecond);
    },
  );
});

describe('GrantClock', () => {
  it.each([
    // The same clocks, answers 3-40 ms after the grant: the shortest travel sets the difference.
    {
      takes: [
        [1_000, 1_040],
        [2_000, 2_003],
        [3_000, 3_012],
      ],
      grantedAt: 4_000,
      startsAt: 4_003 + GRANT_TO_SEND_MS,
    },
    // This instance's clock 5 s behind the database's: the sends start 150 ms after the grant all the same.
    {
      takes: [
        [10_000, 5_020],
        [10_050, 5_052],
      ],
      grantedAt: 10_100,
      startsAt: 5_102 + GRANT_TO_SEND_MS,
    },
    // One answer only, 52 ms late: the start is later than it need be, never earlier.
    { takes: [[1_000, 1_052]], grantedAt: 1_000, startsAt: 1_052 + GRANT_TO_SEND_MS },
  ])('starts the sends of a grant at $grantedAt at $startsAt', ({ takes, grantedAt, startsAt }) => {
    const clock = new GrantClock();
    for (const [granted, answered] of takes) clock.note(granted, answered);
    expect(clock.sendsStartAt(grantedAt)).toBe(startsAt);
  });

  it('forgets a difference 32 takes old, so that a clock stepped forward is followed', () => {
    const clock = new GrantClock();
    clock.note(0, 1);
    for (let take = 1; take <= 32; take++) clock.note(take * 50, take * 50 + 1_000 + 7);
    expect(clock.sendsStartAt(2_000)).toBe(3_007 + GRANT_TO_SEND_MS);
  });
});
