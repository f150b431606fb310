import { describe, expect, it } from '@jest/globals';
import { uuidv7 } from './uuid-v7.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuidv7', () => {
  it.each([
    [0, '00000000-0000'],
    [1, '00000000-0001'],
    [Date.UTC(2026, 10, 30), '01a229c0-5400'],
    [2 ** 48 - 1, 'ffffffff-ffff'],
  ])('puts %d ms in the first 48 bits', (ms, prefix) => {
    const id = uuidv7(ms);
    expect(id).toMatch(UUID_V7);
    expect(id.slice(0, 13)).toBe(prefix);
  });

  it('sorts ids of later milliseconds after earlier ones', () => {
    const ids = [1_000, 1_001, 65_536, Date.now()].map((ms) => uuidv7(ms));
    expect([...ids].sort()).toEqual(ids);
  });

  it('draws fresh random bits for every id, across refills of the pool', () => {
    const ids = Array.from({ length: 2_000 }, () => uuidv7(42));
    expect(new Set(ids).size).toBe(ids.length);
    ids.forEach((id) => expect(id).toMatch(UUID_V7));
  });
});
