import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { QuotaCounts } from '../options/reliable-mail-options.interface.js';
import { keptWithinGrant, quotaChargeOf } from './quota-charge.js';

describe('what a claimed row costs the quota', () => {
  it.each<{ name: string; recipients: number; counts: QuotaCounts; copies: boolean; charge: number }>([
    { name: 'one recipient, either count', recipients: 1, counts: 'messages', copies: false, charge: 1 },
    { name: 'one recipient, counted by recipient', recipients: 1, counts: 'recipients', copies: false, charge: 1 },
    { name: 'five recipients in one message to SES', recipients: 5, counts: 'recipients', copies: false, charge: 5 },
    { name: '120 recipients, three requests of 50', recipients: 120, counts: 'recipients', copies: false, charge: 120 },
    { name: 'five recipients in one request', recipients: 5, counts: 'messages', copies: false, charge: 1 },
    { name: 'five copies of a one-click lane', recipients: 5, counts: 'messages', copies: true, charge: 5 },
    { name: 'five copies counted by recipient', recipients: 5, counts: 'recipients', copies: true, charge: 5 },
    { name: 'nobody left to send to', recipients: 0, counts: 'recipients', copies: false, charge: 0 },
    { name: 'nobody left, counted by message', recipients: 0, counts: 'messages', copies: true, charge: 0 },
  ])('$name: $charge', ({ recipients, counts, copies, charge }) => {
    expect(quotaChargeOf(recipients, counts, copies)).toBe(charge);
  });
});

describe('which claimed rows a grant covers', () => {
  it.each<{ name: string; charges: number[]; granted: number; kept: boolean[] }>([
    { name: 'one each, as granted', charges: [1, 1, 1], granted: 3, kept: [true, true, true] },
    { name: 'rows that fit', charges: [2, 1, 1], granted: 4, kept: [true, true, true] },
    { name: 'the first always, even over', charges: [5, 0, 1], granted: 4, kept: [true, true, false] },
    { name: 'from the first that does not fit', charges: [3, 2, 1], granted: 4, kept: [true, false, false] },
    { name: 'a closed row after it is kept', charges: [2, 3, 0, 1], granted: 4, kept: [true, false, true, false] },
    { name: 'closed rows ahead cost nothing', charges: [0, 0, 4, 1], granted: 4, kept: [true, true, true, false] },
    { name: 'no rows', charges: [], granted: 4, kept: [] },
  ])('$name', ({ charges, granted, kept }) => {
    expect(keptWithinGrant(charges, granted)).toEqual(kept);
  });
});

describe('which claimed rows a grant covers, for any charges', () => {
  it('keeps every free row and the first that costs anything, and never more than granted beyond that one', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(60), { maxLength: 64 }), fc.integer({ min: 1, max: 500 }), (charges, granted) => {
        const kept = keptWithinGrant(charges, granted);
        expect(kept).toHaveLength(charges.length);
        charges.forEach((charge, index) => charge === 0 && expect(kept[index]).toBe(true));
        const first = charges.findIndex((charge) => charge > 0);
        if (first >= 0) expect(kept[first]).toBe(true);
        const used = charges.reduce((sum, charge, index) => (kept[index] ? sum + charge : sum), 0);
        expect(used <= granted || used === charges[first]).toBe(true);
      }),
    );
  });
});
