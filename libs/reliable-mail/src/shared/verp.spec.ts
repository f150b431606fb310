import { describe, expect, it } from '@jest/globals';
import { rowIdOfVerpAddress, verpAddress } from './verp.js';

const verp = { localPart: 'bounces', domain: 'bounces.example.com' };
const id = '0190f0a2-1111-7000-8000-00000000000a';

describe('VERP addresses', () => {
  it('name the row in the local part', () => {
    expect(verpAddress(verp, id)).toBe(`bounces+${id}@bounces.example.com`);
  });

  it.each([
    [`bounces+${id}@bounces.example.com`, id],
    [`BOUNCES+${id.toUpperCase()}@Bounces.Example.com`, id],
    [`bounces+${id}@example.com`, null],
    [`other+${id}@bounces.example.com`, null],
    [`bounces+${id}x@bounces.example.com`, null],
    [`bounces+not-a-row@bounces.example.com`, null],
    [`bounces@bounces.example.com`, null],
    ['no-at-sign', null],
  ])('%s names row %s', (address, expected) => {
    expect(rowIdOfVerpAddress(verp, address)).toBe(expected);
  });
});
