import { describe, expect, it } from '@jest/globals';
import { addDays, dayPartitionOf } from './partitioned-layout.js';

describe('addDays', () => {
  it.each([
    { day: '2026-12-03', days: 1, expected: '2026-12-04' },
    { day: '2026-12-31', days: 1, expected: '2027-01-01' },
    { day: '2028-02-28', days: 1, expected: '2028-02-29' },
    { day: '2027-02-28', days: 1, expected: '2027-03-01' },
    { day: '2026-03-29', days: 1, expected: '2026-03-30' },
    { day: '2026-12-03', days: -40, expected: '2026-10-24' },
    { day: '2026-12-03', days: 0, expected: '2026-12-03' },
  ])('$day + $days = $expected (UTC days: no daylight saving shift)', ({ day, days, expected }) => {
    expect(addDays(day, days)).toBe(expected);
  });
});

describe('dayPartitionOf', () => {
  it.each([
    {
      bound: "FOR VALUES FROM ('2026-12-03') TO ('2026-12-04')",
      expected: { name: 'p', from: '2026-12-03', to: '2026-12-04' },
    },
    { bound: "FOR VALUES FROM (MINVALUE) TO ('2026-12-05')", expected: { name: 'p', from: null, to: '2026-12-05' } },
  ])('reads $bound', ({ bound, expected }) => {
    expect(dayPartitionOf('p', bound)).toEqual(expected);
  });

  it.each([
    "FOR VALUES FROM ('2026-12-03') TO (MAXVALUE)",
    'DEFAULT',
    "FOR VALUES IN ('2026-12-03')",
    "FOR VALUES FROM ('2026-12-03 00:00:00+00') TO ('2026-12-04 00:00:00+00')",
  ])('refuses %s, a bound it never makes', (bound) => {
    expect(() => dayPartitionOf('p', bound)).toThrow('has a bound this code does not make');
  });
});
