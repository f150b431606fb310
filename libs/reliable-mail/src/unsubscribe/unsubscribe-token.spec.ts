import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { propertyRuns } from '../../../../test/support/property-runs.js';
import {
  readUnsubscribeToken,
  type UnsubscribeRequest,
  UnsubscribeTokenError,
  unsubscribeToken,
} from './unsubscribe-token.js';

const secret = 's'.repeat(32);
const ann: UnsubscribeRequest = {
  rowId: '0190f0a2-1111-7000-8000-00000000000a',
  category: 'newsletter',
  address: 'ann@example.org',
};
const token = unsubscribeToken([secret], ann);

/** A token with the MAC of `of` and the named part of `named`: what an attacker can make of a link they got. */
function spliced(of: string, named: UnsubscribeRequest): string {
  const header = Buffer.from(of, 'base64url').subarray(0, 32);
  return Buffer.concat([header, Buffer.from(`${named.category}\n${named.address}`)]).toString('base64url');
}

function refusal(secrets: string[], given: unknown): string {
  try {
    readUnsubscribeToken(secrets, given);
  } catch (error) {
    expect(error).toBeInstanceOf(UnsubscribeTokenError);
    return (error as UnsubscribeTokenError).reason;
  }
  throw new Error('the token was read');
}

describe('one-click unsubscribe tokens', () => {
  it.each<{ name: string; request: UnsubscribeRequest }>([
    { name: 'a plain address', request: ann },
    { name: 'an internationalized address', request: { ...ann, address: 'jörg@bücher.example' } },
    { name: 'the longest category', request: { ...ann, category: `c${'a'.repeat(62)}` } },
  ])('read back what they were made for: $name', ({ request }) => {
    const made = unsubscribeToken([secret], request);
    expect(made).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(readUnsubscribeToken([secret], made)).toEqual(request);
  });

  it('differ per address, category and row', () => {
    expect(unsubscribeToken([secret], { ...ann, address: 'bob@example.org' })).not.toBe(token);
    expect(unsubscribeToken([secret], { ...ann, category: 'digest' })).not.toBe(token);
    expect(unsubscribeToken([secret], { ...ann, rowId: '0190f0a2-1111-7000-8000-00000000000b' })).not.toBe(token);
  });

  const forged = /^its signature does not verify/;
  const malformed = /^the link is malformed/;
  it.each<{ name: string; given: () => unknown; reason: RegExp }>([
    {
      name: "Ann's MAC on Bob's address",
      given: () => spliced(token, { ...ann, address: 'bob@example.org' }),
      reason: forged,
    },
    {
      name: "Ann's MAC on another category",
      given: () => spliced(token, { ...ann, category: 'digest' }),
      reason: forged,
    },
    {
      name: "Ann's MAC on another row",
      given: () => {
        const bytes = Buffer.from(token, 'base64url');
        bytes[15] ^= 1;
        return bytes.toString('base64url');
      },
      reason: forged,
    },
    {
      name: 'a token signed with another secret',
      given: () => unsubscribeToken(['o'.repeat(32)], ann),
      reason: forged,
    },
    {
      name: 'a character changed',
      given: () => `${token.slice(0, 10)}${token[10] === 'A' ? 'B' : 'A'}${token.slice(11)}`,
      reason: forged,
    },
    { name: 'no token', given: () => undefined, reason: malformed },
    { name: 'an empty token', given: () => '', reason: malformed },
    { name: 'a token given twice (?token=a&token=b)', given: () => [token, token], reason: malformed },
    { name: 'a character outside base64url', given: () => `${token.slice(0, -1)}+`, reason: malformed },
    { name: 'padding', given: () => `${token}=`, reason: malformed },
    { name: 'the row id and MAC alone', given: () => token.slice(0, 43), reason: malformed },
    { name: 'a token longer than any this app makes', given: () => 'A'.repeat(1_001), reason: malformed },
  ])('refuse $name, saying why', ({ given, reason }) => {
    expect(refusal([secret], given())).toMatch(reason);
  });

  it('a token whose last character carries bits base64url drops is not a second form of the same token', () => {
    // 58 bytes leave 4 bits of the last character spare: the next character up reads as the same bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const twin = token.slice(0, -1) + alphabet[alphabet.indexOf(token.at(-1)!) + 1];
    expect(Buffer.from(twin, 'base64url')).toEqual(Buffer.from(token, 'base64url'));
    expect(refusal([secret], twin)).toMatch(malformed);
  });

  it('rotate: signed with the newest secret, read with any; an old secret dropped, its tokens are refused', () => {
    const newer = 'n'.repeat(32);
    const signedNew = unsubscribeToken([secret, newer], ann);
    expect(readUnsubscribeToken([newer], signedNew)).toEqual(ann);
    expect(readUnsubscribeToken([secret, newer], token)).toEqual(ann);
    expect(refusal([newer], token)).toMatch(forged);
  });
});

describe('readUnsubscribeToken of hostile input (a query parameter anyone can send)', () => {
  it('any value that this secret did not sign: an UnsubscribeTokenError, never another error', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.anything()), (token) => {
        try {
          readUnsubscribeToken([secret], token);
          throw new Error(`accepted ${JSON.stringify(token)}`);
        } catch (error) {
          expect(error).toBeInstanceOf(UnsubscribeTokenError);
        }
      }),
      propertyRuns('unsubscribe token of any value'),
    );
  });

  it('a signed token with any one character changed never reads as a request (another address, category or row)', () => {
    const token = unsubscribeToken([secret], ann);
    fc.assert(
      fc.property(fc.nat({ max: token.length - 1 }), fc.string({ minLength: 1, maxLength: 1 }), (at, character) => {
        fc.pre(token[at] !== character);
        const altered = token.slice(0, at) + character + token.slice(at + 1);
        expect(() => readUnsubscribeToken([secret], altered)).toThrow(UnsubscribeTokenError);
      }),
      propertyRuns('unsubscribe token altered'),
    );
  });
});
