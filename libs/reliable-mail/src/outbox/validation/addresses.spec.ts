import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { MailValidationError } from '../../errors.js';
import { parseAddress, splitNamedAddress } from './addresses.js';

describe('splitNamedAddress', () => {
  it.each([
    ['Ann <ann@example.com>', { name: 'Ann', address: 'ann@example.com' }],
    ['  "Ann Lee"\t<ann@example.com>  ', { name: 'Ann Lee', address: 'ann@example.com' }],
    ['"Ann " <ann@example.com>', { name: 'Ann ', address: 'ann@example.com' }],
    ['<ann@example.com>', { name: '', address: 'ann@example.com' }],
    ['" <ann@example.com>', { name: '', address: 'ann@example.com' }],
    ['A>B <ann@example.com>', { name: 'A>B', address: 'ann@example.com' }],
    ['ann@example.com', null],
    ['Ann "x" <ann@example.com>', null],
    ['Ann <ann@example.com> x', null],
    ['Ann <<ann@example.com>', null],
    ['Ann <>', null],
    ['Ann <a>b>', null],
  ])('%j', (input, split) => {
    expect(splitNamedAddress(input)).toEqual(split);
  });

  // The regular expression it replaced, as the oracle on inputs short enough for its backtracking.
  const replaced = /^\s*"?([^"<]*?)"?\s*<([^<>]+)>\s*$/;
  it('property: splits exactly as the regular expression it replaced', () => {
    const pieces = fc.constantFrom(' ', '\t', '\n', '"', '<', '>', 'a', '@', '.', 'b', '\u00a0');
    fc.assert(
      fc.property(
        fc.array(pieces, { maxLength: 14 }).map((chars) => chars.join('')),
        (input) => {
          const match = replaced.exec(input);
          expect(splitNamedAddress(input)).toEqual(match ? { name: match[1], address: match[2] } : null);
        },
      ),
      { numRuns: 20_000 },
    );
  });
});

describe('parseAddress', () => {
  // 4,000 tabs held the event loop for 9.6 s in the regular expression this replaced, a million (the input of a
  // property test that hung CI) for ever; a synchronous loop cannot be timed out, so this hung before the change.
  it('reads an address after a million whitespace characters without backtracking through them', () => {
    expect(parseAddress('bcc', `${'\t'.repeat(1_000_000)}=0ja@sod.a44fgambl2nv.vbd`)).toEqual({
      address: '=0ja@sod.a44fgambl2nv.vbd',
    });
    expect(() => parseAddress('bcc', `${' '.repeat(1_000_000)}Ann ann@example.com>`)).toThrow(MailValidationError);
  });
});
